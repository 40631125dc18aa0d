"""A prompt set of one's own (``--prompt-set FILE.json``): read field by field, as the model will see it."""

import json

import pytest

from seakr.prompts import FAMILIES, PromptSet

GOOD = {"question": "Which river flows through the capital of Austria?", "steps": ["The capital of Austria is Vienna",
        "The Danube flows through Vienna"], "answer": "the Danube"}


@pytest.mark.parametrize("family", FAMILIES)
def test_the_packaged_sets_load(family):
    ps = PromptSet.load(family)
    assert ps.demos and all(d.question and d.answer for d in ps.demos)


def test_a_set_of_ones_own_loads_and_renders(tmp_path):
    f = tmp_path / "mine.json"
    f.write_text(json.dumps({"name": "mine", "demos": [GOOD, {**GOOD, "steps": []}]}))
    ps = PromptSet.load(str(f))
    assert ps.name == "mine" and ps.demos[0].steps == GOOD["steps"]
    assert ps.demos[0].render().endswith("The Danube flows through Vienna. So the answer is the Danube.")


@pytest.mark.parametrize("demo, needle", [
    ({**GOOD, "steps": "The capital is Vienna"}, "field demos[0].steps: expected a list of texts"),  # was split into letters
    ({**GOOD, "steps": ["a", ""]}, "field demos[0].steps[1]: an empty sentence"),
    ({**GOOD, "steps": ["Vienna is the capital. The Danube flows"]}, "field demos[0].steps[0]: holds a stop string"),
    ({**GOOD, "steps": ["Vienna\nis the capital"]}, "field demos[0].steps[0]: holds a stop string"),
    # rendered "... So the answer is the Danube. So the answer is the Danube.": the answer twice, once mid-chain
    ({**GOOD, "steps": GOOD["steps"] + ["So the answer is the Danube"]}, "field demos[0].steps[2]: gives the answer ("),
    ({**GOOD, "steps": ["The final answer is: the Danube"]}, "put the answer in 'answer' only"),
    ({**GOOD, "question": None}, "field demos[0].question: expected text, got None"),  # rendered "None"
    ({**GOOD, "answer": 5}, "field demos[0].answer: expected text, got 5"),
    ({**GOOD, "answer": "a\nb"}, "field demos[0].answer: holds a line break"),
    ({**GOOD, "type": 3}, "field demos[0].type: expected text, got 3"),
    ({**GOOD, "answers": ["Danube"]}, "field demos[0]: Demo: unknown field(s) 'answers' (did you mean 'answer'?)"),  # never read
    ("a demo", "field demos[0]: expected an object, got 'a demo'"),
])
def test_a_malformed_demonstration_is_named_with_its_field(tmp_path, demo, needle):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps({"demos": [demo]}))
    with pytest.raises(ValueError, match="bad.json: ") as e:
        PromptSet.load(str(f))
    assert needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("body, needle", [("[1, 2]", "expected an object with a list 'demos'"),
                                          ('{"demos": {}}', "field demos: expected a list of objects, got {}"),
                                          ('{"name": 5, "demos": [{"question": "q", "steps": [], "answer": "a"}]}', "field name: expected text or null, got 5"),
                                          ("{", "malformed prompt set"),
                                          # every prompt was the question alone, without the steps or the marker
                                          ('{"demos": []}', "field demos: at least 1 item(s), got []"),
                                          ('{"demo": [], "demos": [1]}', "unknown field(s) 'demo' (did you mean 'demos'?)")])
def test_a_malformed_set_is_named(tmp_path, body, needle):
    f = tmp_path / "bad.json"
    f.write_text(body)
    with pytest.raises(ValueError, match="bad.json: ") as e:
        PromptSet.load(str(f))
    assert needle in str(e.value)


@pytest.mark.parametrize("style", ["plain", "chat"])
def test_a_question_is_one_line_of_single_spaces_in_every_prompt(style):
    """A newline inside a question (typed in a form, pasted from a page) broke the "Question: ..." line as the blank
    line between demonstrations does; double spaces (3 % of HotpotQA train questions hold one) were kept as written.
    Terminal escapes and control characters reached the prompt, from a question or a passage."""
    from seakr.prompts import CONTEXT_FOOTER, PromptBuilder

    chat = (lambda msgs: "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in msgs) + "<assistant>")
    pb = PromptBuilder("hotpotqa", style=style, chat=chat if style == "chat" else None)
    asked, _ = pb.render("Who\n\ndirected  Alien?\t")
    tidy, _ = pb.render("Who directed Alien?")
    assert asked == tidy and "Question: Who directed Alien?" in asked
    pasted = "\x1b[1mWho\x1b[0m directed\x00 Alien?\x07\x1b]0;title\x07"  # from a console: escapes, a NUL, a bell
    assert pb.render(pasted)[0] == tidy and pb.render_short(pasted) == pb.render_short("Who directed Alien?")
    block = pb.context_block(["Alien\x00 (1979)\x1b[0m is a film."])
    assert block.endswith(f"[1] Alien (1979) is a film.\n{CONTEXT_FOOTER}\n")
    assert pb.render_short("Who \r\n directed Mr. X's  film?")[0] == pb.render_short("Who directed Mr X's film?")[0]


@pytest.mark.parametrize("style", ["plain", "chat"])
def test_the_instruction_names_the_marker_the_demonstrations_end_with(style):
    """With ``marker="The result is"`` each demonstration ended with it, and the instruction still said to finish
    with "So the answer is"."""
    from seakr.prompts import PromptBuilder

    chat = (lambda msgs: "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in msgs) + "<assistant>")
    prompt, prefix = PromptBuilder("hotpotqa", n_shot=1, style=style, chat=chat if style == "chat" else None,
                                   marker="The result is").render("Who directed Alien?")
    assert 'finish with "The result is"' in prefix and "answer is" not in prompt.lower()


def test_no_demonstrations_leave_no_blank_lines_in_their_place():
    from seakr.prompts import INSTRUCTION, PromptBuilder

    prompt, prefix = PromptBuilder("hotpotqa", n_shot=0).render("Who directed Alien?")
    assert prompt == f"{INSTRUCTION}\n\nQuestion: Who directed Alien?\nAnswer:" and prefix == f"{INSTRUCTION}\n\n"
    full, _ = PromptBuilder("hotpotqa").render("Who directed Alien?")  # with them: one blank line after each
    assert "\n\n\n" not in full and full.endswith(".\n\nQuestion: Who directed Alien?\nAnswer:")


def test_a_marker_the_demonstrations_steps_say_is_refused_with_the_step(tmp_path):
    """A step saying "the answer is" is refused when a set loads; a step saying the method's own marker was not
    (the marker is a method option), and a chain ended at any step that said it: marker="is" read "The capital of
    Austria is Vienna" as the answer. Refused where options are checked, for the demonstrations the method shows."""
    from seakr.methods import SeaKRConfig

    said = dict(GOOD, steps=["The result is a river", "The Danube flows through Vienna"])
    f = tmp_path / "mine.json"
    f.write_text(json.dumps({"demos": [GOOD, said]}))
    with pytest.raises(ValueError, match=r"^option marker: 'The result is' is said in step 1 of demonstration 1 of "
                                         r"prompt set '.*mine\.json' \('The result is a river'\)"):
        SeaKRConfig(marker="The result is", prompt_set=str(f))
    assert SeaKRConfig(marker="The result is", prompt_set=str(f), n_shot=1).n_shot == 1  # demonstration 1 not shown
    assert SeaKRConfig(prompt_set=str(f)).marker == "So the answer is"  # the default's words: nothing to find
    with pytest.raises(ValueError, match=r"^option marker: 'is' is said in step 1 of demonstration 1 "):
        SeaKRConfig(marker="is", prompt_set="hotpotqa")


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_prompt_set_name_is_named_as_empty_at_every_door(name):
    """`--option prompt_set=` (a grid's `prompt_set = ""`, `prompt_set=""` from Python) was read as the current
    folder: ".: is a directory, expected a file (it holds ...: name one)"; blanks were "unknown prompt set ' '"."""
    from seakr.methods import METHODS

    with pytest.raises(ValueError, match=r"^an empty prompt set name; give hotpotqa, .* or a JSON file, or leave it out$"):
        PromptSet.load(name)
    with pytest.raises(ValueError, match=r"^option prompt_set: an empty prompt set name"):
        METHODS["seakr"].Config.from_dict({"prompt_set": name})
