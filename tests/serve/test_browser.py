"""A person's view: headless Debian chromium opens the trace viewer, asks, and sees steps + answer."""

import os
import shutil

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = os.path.join(os.path.dirname(__file__), "..", "..", "test-artifacts")


def test_viewer_end_to_end(server):
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.fail("chromium and chromium-driver are required (the Makefile installs them with apt-get)")
    url, _ = server
    opts = Options()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--window-size=1100,1400", "--disable-dev-shm-usage"):
        opts.add_argument(a)
    b = webdriver.Chrome(service=Service(driver), options=opts)
    try:
        b.get(url + "/")
        assert "seakr" in b.title
        b.find_element(By.ID, "q").send_keys("Who directed the film Jaws?")
        Select(b.find_element(By.ID, "method")).select_by_value("seakr")
        b.find_element(By.ID, "go").click()
        ans = WebDriverWait(b, 400).until(EC.presence_of_element_located((By.ID, "answer")))
        steps = b.find_elements(By.CSS_SELECTOR, ".step")
        assert steps, "no reasoning step rendered"
        assert b.find_elements(By.CSS_SELECTOR, ".ubar"), "no uncertainty bar rendered"
        assert "Step 1" in steps[0].text
        assert b.find_element(By.ID, "status").text == "done"
        assert isinstance(ans.text, str)
        # the paper's final rule (no probes ship for this model) compares the two answers' U
        choice = b.find_element(By.CSS_SELECTOR, ".choice").text
        assert "from rationale:" in choice and "(U " in choice and "chose" in choice
        os.makedirs(ARTIFACTS, exist_ok=True)
        b.save_screenshot(os.path.join(ARTIFACTS, "viewer.png"))
        # the passages box: a reader's own paragraphs are searched instead of the server's index
        assert b.execute_script("return ownPassages(arguments[0])", "# Zorblax\nZorblax is a moon.\n\n  plain text \n \n\n") == [
            {"title": "Zorblax", "text": "Zorblax is a moon."}, {"text": "plain text"}]
        b.find_element(By.CSS_SELECTOR, "#own summary").click()
        b.find_element(By.ID, "passages").send_keys("# Zorblax Chronicle\nZorblax Chronicle is a 1983 film directed by "
                                                    "Quentin Vale.\n\nQuentin Vale was born in Perth.")
        b.find_element(By.ID, "q").clear()
        b.find_element(By.ID, "q").send_keys("Who directed Zorblax Chronicle?")
        Select(b.find_element(By.ID, "method")).select_by_value("single")
        b.find_element(By.ID, "go").click()
        WebDriverWait(b, 400).until(lambda d: d.find_element(By.ID, "status").text in ("done",) or
                                    d.find_elements(By.CSS_SELECTOR, ".status .error"))
        assert b.find_element(By.ID, "status").text == "done"
        assert "read from Zorblax Chronicle" in b.find_element(By.CSS_SELECTOR, ".final").text  # not in the server's index
        b.save_screenshot(os.path.join(ARTIFACTS, "viewer-passages.png"))
        # a trace of the default's probe-driven rules (this server's model has none): past a knowledge check no
        # step is scored (no U, no bar), the candidates and the final answers carry probabilities
        probed = {"question": "q?", "answer": "Seine", "method": "seakr", "trace": {
            "steps": [{"index": 0, "pseudo": "Paris is the capital", "u": None, "threshold": None, "retrieved": True,
                       "query": "Paris", "kept": {"title": "Paris"}, "text": "Paris is the capital",
                       "candidates": [{"rank": 0, "title": "Paris", "step": "s", "u": None, "p": 0.85, "chosen": True},
                                      {"rank": 1, "title": "Lyon", "step": "s", "u": None, "p": 0.23}]}],
            "final": {"choice": "knowledge", "candidates": {"rationale": {"answer": "Paris", "u": None, "p": 0.1},
                                                            "knowledge": {"answer": "Seine", "u": None, "p": 0.95}}},
            "totals": {"model_calls": 5, "retrievals": 1, "sampled_sequences": 0, "seconds": {"total": 1.0}}}}
        b.execute_script("renderAnswer(arguments[0], document.getElementById('out'))", probed)
        step = b.find_element(By.CSS_SELECTOR, ".step")
        assert "U =" not in step.text and not step.find_elements(By.CSS_SELECTOR, ".ubar")
        assert "P 0.85" in step.text and "P 0.23" in step.text
        choice = b.find_element(By.CSS_SELECTOR, ".choice").text
        assert "Paris (P(correct) 0.10)" in choice and "Seine (P(correct) 0.95)" in choice and "U inf" not in choice
        assert "1 retrievals ·" in b.find_element(By.CSS_SELECTOR, ".totals").text  # none found nothing: no count
        probed["trace"]["totals"].update(retrievals=2, empty_retrievals=2)  # an index of other passages
        b.execute_script("renderAnswer(arguments[0], document.getElementById('out'))", probed)
        assert "2 retrievals (2 found nothing)" in b.find_element(By.CSS_SELECTOR, ".totals").text
        # a step that decided to retrieve and found no new passage read "no retrieval", as if its gate had declined
        probed["trace"]["steps"][0].update(retrieved=False, kept=None, candidates=[], note="no new passage: stop")
        b.execute_script("renderAnswer(arguments[0], document.getElementById('out'))", probed)
        head = b.find_element(By.CSS_SELECTOR, ".step h3").text
        assert "retrieve" in head and "no retrieval" not in head and "(no new passage: stop)" in head, head
    finally:
        b.quit()


def test_the_viewer_asks_for_a_servers_token_and_sends_it(small_index):
    """With --token set, a page load cannot send the header: the page comes without it, asks for the token when the
    API says 401, and sends it with the question."""
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from helpers import serving

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.fail("chromium and chromium-driver are required (the Makefile installs them with apt-get)")
    opts = Options()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-dev-shm-usage"):
        opts.add_argument(a)
    with serving(small_index, extra=("--token", "s3cret")) as (_, url):
        b = webdriver.Chrome(service=Service(driver), options=opts)
        try:
            b.get(url + "/")
            assert not b.find_element(By.ID, "token").is_displayed()
            b.find_element(By.ID, "q").send_keys("Who directed the film Jaws?")
            Select(b.find_element(By.ID, "method")).select_by_value("cot")
            b.find_element(By.ID, "go").click()
            WebDriverWait(b, 60).until(lambda d: d.find_element(By.ID, "token").is_displayed())
            assert "needs its token" in b.find_element(By.ID, "status").text
            b.find_element(By.ID, "token").send_keys("s3cret")
            b.find_element(By.ID, "go").click()
            WebDriverWait(b, 400).until(lambda d: d.find_element(By.ID, "status").text == "done" or
                                        d.find_elements(By.CSS_SELECTOR, ".status .error"))
            assert b.find_element(By.ID, "status").text == "done" and b.find_elements(By.ID, "answer")
        finally:
            b.quit()
