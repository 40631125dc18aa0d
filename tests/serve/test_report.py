"""`seakr report`: one page for every eval run and study under a folder, and one line for a study file
that is not what the study writes."""

import json

import pytest

from seakr.serve.render import report_html

RERANK = {"model": "m", "N": 3, "n": 4, "recall@1_engine": 0.75, "recall@1_self_aware": 0.5, "recall@1_guarded": None,
          "gold_in_top_n": 1.0, "paired_vs_engine": {"seakr_top1_gold": {"n": 4, "mean_difference": -0.25, "ci95": [-0.75, 0.0]}}}


def test_a_rerank_study_and_a_calibration_without_its_plot_are_reported(tmp_path):
    """Both folders were refused ("no eval results, detect.json or plots found"), while `seakr compare`
    sent the user to `seakr report` for a re-rank study."""
    (tmp_path / "rr").mkdir()
    (tmp_path / "rr" / "rerank.json").write_text(json.dumps(RERANK))
    (tmp_path / "cal").mkdir()
    (tmp_path / "cal" / "calibration.json").write_text(json.dumps(
        {"model": "m", "estimator": "eigen", "n": 30, "chosen": {"delta": -1.25, "f1": 0.4, "retrieval_rate": 0.5}}))
    page = report_html(str(tmp_path))
    assert "<h2>Re-ranking: rr (m, n=4, gold in the top 3: 1.00)</h2>" in page
    assert "<td>self-aware (min U)</td><td>0.500</td><td>-0.25 (CI -0.75..+0.00)</td>" in page
    assert "<td>guarded</td><td>–</td>" in page  # an older log's missing column: no figure, not a crash
    assert "<h2>Calibration: cal (m, eigen, n=30)</h2>" in page and "<td>-1.250</td><td>0.400</td><td>0.50</td>" in page


@pytest.mark.parametrize("name,content,needle", [
    ("detect.json", {"n": 3}, "field 'estimators' is missing, not an object"),
    ("detect.json", [1], "not a JSON object"),
    ("detect.json", {"estimators": {"eigen": 0.8}}, "field 'estimators.eigen' is not an object"),
    ("rerank.json", {"n": "4"}, "field 'n' is '4', not a whole number"),
    ("calibration.json", {"chosen": None}, "field 'chosen' is None, not an object"),
])
def test_a_study_file_another_tool_wrote_is_named_with_its_field(tmp_path, name, content, needle):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / name).write_text(json.dumps(content))
    with pytest.raises(ValueError) as e:
        report_html(str(tmp_path))
    assert str(e.value) == f"{tmp_path / 's' / name}: {needle}"


def test_an_empty_folder_names_what_a_report_reads(tmp_path):
    with pytest.raises(ValueError, match="no eval results, study results .detect.json, rerank.json, calibration.json. or plots"):
        report_html(str(tmp_path))


def test_runs_of_one_name_in_several_folders_are_told_apart(tmp_path):
    """A report of a folder of tables listed "seakr" ten times with ten sets of figures and no folder."""
    for table, f1 in (("table-a", 1.0), ("table-b", 0.0)):
        run = tmp_path / table / "seakr"
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps({"name": "seakr"}))
        (run / "scores.jsonl").write_text(json.dumps({"id": "q", "em": f1, "f1": f1}) + "\n")
        (tmp_path / table / "dev-short").mkdir()  # and studies of one folder name under each
        (tmp_path / table / "dev-short" / "detect.json").write_text(json.dumps({"model": "m", "n": 2, "estimators": {}}))
    page = report_html(str(tmp_path))
    assert "<td>table-a/seakr</td><td>1</td><td>100.0" in page and "<td>table-b/seakr</td><td>1</td><td>0.0" in page
    assert "<h2>Detection: table-a/dev-short (m, n=2)</h2>" in page and "<h2>Detection: table-b/dev-short (m, n=2)</h2>" in page


def test_a_folder_named_in_another_encoding_is_reported(tmp_path):
    """A run folder whose name is not UTF-8 (Latin-1 bytes; Python holds them as lone surrogates) made the page
    unwritable: "'utf-8' codec can't encode character '\\udcfe' ... surrogates not allowed"."""
    from seakr.serve.render import write_report

    root = tmp_path / "r\udcfe"  # the byte 0xfe
    run = root / "seakr"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"name": "seakr"}))
    (run / "scores.jsonl").write_text(json.dumps({"id": "q", "em": 1.0, "f1": 1.0}) + "\n")
    write_report(str(root), str(tmp_path / "page.html"))
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert "report: " + str(tmp_path / "r\ufffd") in page and "<td>seakr</td><td>1</td><td>100.0" in page
