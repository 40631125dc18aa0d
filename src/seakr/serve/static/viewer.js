// seakr trace viewer: renders an answer's trace; streams steps live from /v1/answer/stream.
"use strict";
const fmt = (u) => (u === null || u === undefined) ? "inf" : Number(u).toFixed(2);
// What a rule compared: a probability where a probe or a calibration map read one (no samples, no U), else U.
const read = (c, what) => (c.p !== null && c.p !== undefined) ? `${what} ${Number(c.p).toFixed(2)}` : `U ${fmt(c.u)}`;
function esc(s) { const d = document.createElement("div"); d.textContent = s == null ? "" : String(s); return d.innerHTML; }

// Map U values to bar widths on one shared scale (the threshold included).
function scaleFor(values) {
  const v = values.filter((x) => x !== null && x !== undefined && isFinite(x));
  if (!v.length) return { lo: -1, hi: 1 };
  let lo = Math.min(...v), hi = Math.max(...v);
  if (hi - lo < 1e-6) { lo -= 1; hi += 1; }
  const pad = 0.1 * (hi - lo);
  return { lo: lo - pad, hi: hi + pad };
}
function bar(u, delta, sc) {
  const pos = (x) => Math.max(0, Math.min(100, 100 * (x - sc.lo) / (sc.hi - sc.lo)));
  const w = (u === null || u === undefined) ? 100 : pos(u);
  const high = delta !== null && delta !== undefined && (u === null || u === undefined || u > delta);
  const dl = (delta === null || delta === undefined) ? "" : `<div class="delta" style="left:${pos(delta)}%" title="threshold ${fmt(delta)}"></div>`;
  return `<div class="ubar"><div class="fill ${high ? "high" : ""}" style="width:${w}%"></div>${dl}</div>`;
}
function renderStep(s, sc) {
  // a step that decided to retrieve has its query, whether or not a new passage came of it (its note says why not)
  const tag = s.retrieved ? '<span class="tag retr">retrieved</span>' : s.query ? '<span class="tag retr">retrieve</span>' :
    '<span class="tag noretr">no retrieval</span>';
  const note = s.note ? ` <i>(${esc(s.note)})</i>` : "";
  const kept = s.kept ? ` kept <b>${esc(s.kept.title || s.kept.id)}</b>` : "";  // a pasted passage may have no title
  const q = s.query ? ` &middot; query <code>${esc(s.query)}</code>` : "";
  // no U: +inf where a threshold judged the step (a failed or empty step retrieves), nothing where none did
  // (a method that scores no steps, or a chain past a knowledge check, where every step retrieves)
  const ulabel = (s.u === null && (!s.pseudo || s.threshold == null)) ? "" :
    `<div class="ulabel">U = ${fmt(s.u)}${s.threshold !== null && s.threshold !== undefined ? " vs threshold " + fmt(s.threshold) : ""}</div>${bar(s.u, s.threshold, sc)}`;
  let cands = "";
  if (s.candidates && s.candidates.length) {
    cands = '<table class="cands"><tr><th>#</th><th>passage</th><th>next step with it</th><th>U or P(support)</th></tr>' +
      s.candidates.map((c) => `<tr class="${c.chosen ? "chosen" : ""}"><td>${c.rank + 1}</td><td>${esc(c.title || c.id)}</td>` +
        `<td>${esc(c.step)}</td><td>${read(c, "P")}${c.chosen ? " &#10003;" : ""}</td></tr>`).join("") + "</table>";
  }
  const pseudo = (s.pseudo && s.pseudo !== s.text) ? `<div class="pseudo">tentative: ${esc(s.pseudo)}</div>` : "";
  return `<div class="step" data-step="${s.index}"><h3>Step ${s.index + 1} ${tag}${kept}${q}${note}</h3>` +
    `<div class="sentence">${esc(s.text) || "<i>(empty)</i>"}</div>${pseudo}${ulabel}${cands}</div>`;
}
function renderFinal(ans) {
  const f = ans.trace.final || {};
  let choice = "";
  const cands = Object.entries(f.candidates || {});
  if (cands.length > 1) {  // e.g. SeaKR's answers from the rationales and from the knowledge
    choice = `<div class="choice">` + cands.map(([name, c]) => `from ${esc(name)}: <b>${esc(c.answer)}</b> (${read(c, "P(correct)")})`)
      .join(" &middot; ") + ` &rarr; chose <b>${esc(f.choice)}</b></div>`;
  } else if (f.choice) {
    choice = `<div class="choice">${esc(f.choice)}</div>`;
  }
  const from = (f.passages || []).map((p) => `<b>${esc(p.title || p.id)}</b>`).join(", ");
  if (from) choice += `<div class="choice">read from ${from}</div>`;
  const t = ans.trace.totals || {};
  const secs = (t.seconds && t.seconds.total) ? t.seconds.total.toFixed(1) : "?";
  const empty = t.empty_retrievals ? ` (${Number(t.empty_retrievals)} found nothing)` : "";  // an index of other passages
  return `<div class="final"><div>Answer (${esc(ans.method)})</div><div class="answer" id="answer">${esc(ans.answer)}</div>${choice}` +
    `<div class="totals">${t.model_calls} model calls &middot; ${t.retrievals} retrievals${empty} &middot; ${t.sampled_sequences} sampled sequences &middot; ${secs} s</div></div>`;
}
function renderAnswer(ans, el) {
  const steps = ans.trace.steps || [];
  const sc = scaleFor(steps.flatMap((s) => [s.u, s.threshold, ...(s.candidates || []).map((c) => c.u)]));
  el.innerHTML = `<div class="question"><b>Q:</b> ${esc(ans.question)}</div>` + steps.map((s) => renderStep(s, sc)).join("") + renderFinal(ans);
}

// The passages box: paragraphs separated by blank lines, each optionally opened by a "# Title" line. Empty: the
// server's index is searched.
function ownPassages(text) {
  const blocks = (text || "").split(/\n[ \t]*\n/).map((b) => b.trim()).filter((b) => b.length);
  return blocks.map((b) => {
    const m = b.match(/^#[ \t]+(.*)(?:\n([\s\S]*))?$/);
    return m ? { title: m[1].trim(), text: (m[2] || "").trim() || m[1].trim() } : { text: b };
  });
}

// A server started with --token answers the API only with "Authorization: Bearer <token>": a browser's page load
// cannot send that header, so the page and its files come without it, and the page asks for the token the first
// time the API says 401, keeps it for this tab (sessionStorage) and sends it with every request.
function authHeaders() {
  const field = document.getElementById("token");
  if (field && field.value) sessionStorage.setItem("seakr-token", field.value);
  const token = sessionStorage.getItem("seakr-token");
  return token ? { Authorization: "Bearer " + token } : {};
}

function askForToken(status) {
  sessionStorage.removeItem("seakr-token");
  const field = document.getElementById("token");
  field.hidden = false; field.value = ""; field.focus();
  status.innerHTML = '<span class="error">this server needs its token: enter it and ask again</span>';
}

async function ask(ev) {
  ev.preventDefault();
  const q = document.getElementById("q").value, method = document.getElementById("method").value;
  const box = document.getElementById("passages"), passages = ownPassages(box ? box.value : "");
  const out = document.getElementById("out"), status = document.getElementById("status"), btn = document.getElementById("go");
  out.innerHTML = ""; status.textContent = "thinking..."; btn.disabled = true;
  const live = [];
  try {
    const resp = await fetch("/v1/answer/stream", { method: "POST",
      headers: Object.assign({ "Content-Type": "application/json" }, authHeaders()),
      body: JSON.stringify(Object.assign({ question: q, method }, passages.length ? { passages } : {})) });
    if (resp.status === 401) { askForToken(status); return; }
    if (!resp.ok) { const e = await resp.json(); throw new Error(e.detail + (e.errors ? ": " + JSON.stringify(e.errors) : "")); }
    const reader = resp.body.getReader(), dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const chunk = buf.slice(0, i); buf = buf.slice(i + 2);
        const kind = (chunk.match(/^event: (.*)$/m) || [])[1], data = JSON.parse((chunk.match(/^data: (.*)$/m) || [])[1] || "null");
        if (kind === "event" && data.type === "step") {
          live.push(data);
          const sc = scaleFor(live.flatMap((s) => [s.u, s.threshold]));
          out.innerHTML = live.map((s) => renderStep(s, sc)).join("");
        } else if (kind === "event" && data.type === "model_call") {
          status.textContent = `${data.purpose}: ${data.samples} samples, ${data.seconds}s`;
        } else if (kind === "event" && data.type === "retrieval") {
          status.textContent = `searched: ${data.query}`;
        } else if (kind === "answer") {
          renderAnswer(data, out); status.textContent = "done";
        } else if (kind === "error") {
          throw new Error(data.detail);
        }
      }
    }
  } catch (e) {
    status.innerHTML = `<span class="error">${esc(e.message)}</span>`;
  } finally { btn.disabled = false; }
}
if (typeof document !== "undefined") {
  document.addEventListener("DOMContentLoaded", () => {
    const form = document.getElementById("ask");
    if (form) form.addEventListener("submit", ask);
    const embedded = document.getElementById("seakr-answer");
    if (embedded) renderAnswer(JSON.parse(embedded.textContent), document.getElementById("out"));
  });
}
