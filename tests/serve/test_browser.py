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
    finally:
        b.quit()
