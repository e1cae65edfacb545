// The page of `aworld-train view`: one script for the served page and the exported file. The
// served page asks the server (/api/...); the exported file carries the answers it can give.
"use strict";
(function () {
  const EXPORTED = window.VIEW_EXPORT || null;
  const TOKEN = new URLSearchParams(location.search).get("token");
  // The curves a run's page draws, in this order, with every eval_* metric after them.
  const CURVES = ["reward", "loss", "kl", "entropy", "agent_failed", "tools/call_frequency",
    "learning_rate"];
  const LIVE_MS = 1000;
  let timer = null;
  let generation = 0; // which page is shown: a poll of a page left behind stops

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined) continue;
      if (key === "onclick" || key === "oninput" || key === "onsubmit" || key === "onchange") {
        node[key] = value;
      } else {
        node.setAttribute(key, value);
      }
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function query(params) {
    const kept = Object.entries(params).filter(([, v]) => v !== "" && v !== null && v !== undefined);
    return new URLSearchParams(kept).toString();
  }

  // The answer to one question, null when there is none (a missing run; a question the
  // exported file cannot answer).
  async function ask(question, params) {
    const asked = query(params || {});
    if (EXPORTED) {
      const key = question + (asked ? "?" + asked : "");
      return key in EXPORTED.answers ? EXPORTED.answers[key] : null;
    }
    const withToken = query(Object.assign({}, params || {}, { token: TOKEN }));
    const response = await fetch("api/" + question + (withToken ? "?" + withToken : ""));
    if (response.status === 404) return null;
    if (!response.ok) throw new Error(question + ": " + response.status);
    return response.json();
  }

  function every(ms, action) {
    const mine = generation;
    const tick = async () => {
      if (mine !== generation) return;
      const again = await action();
      if (again !== false && mine === generation) timer = setTimeout(tick, ms);
    };
    timer = setTimeout(tick, ms);
  }

  function show(title, ...content) {
    document.getElementById("where").textContent = title;
    const main = document.getElementById("main");
    main.replaceChildren(...content);
    return main;
  }

  function number(value, digits) {
    if (value === null || value === undefined || value === "") return "";
    if (typeof value !== "number") return String(value);
    return Number.isInteger(value) ? String(value) : value.toPrecision(digits || 4);
  }

  function runLink(id, text) {
    return el("a", { href: "#/run/" + encodeURIComponent(id) }, text || id);
  }

  // ---- runs ----
  const RUN_COLUMNS = [
    ["id", "run"], ["status", "status"], ["engine", "engine"], ["algorithm", "algorithm"],
    ["model", "model"], ["started", "started"], ["steps_done", "steps"],
    ["last_reward", "last reward"], ["chain", "run chain"],
  ];

  async function runsPage() {
    const state = { sort: "started", descending: true, filter: "", runs: [] };
    const body = el("tbody");
    const heads = RUN_COLUMNS.map(([key, label]) => el("th", {
      class: "sortable", "data-sort": key,
      onclick: () => {
        state.descending = state.sort === key ? !state.descending : false;
        state.sort = key;
        fill();
      },
    }, label));
    const filter = el("input", {
      type: "search", id: "filter", placeholder: "filter runs",
      oninput: (event) => { state.filter = event.target.value.toLowerCase(); fill(); },
    });
    const compare = el("button", {
      id: "compare", onclick: () => {
        const chosen = [...body.querySelectorAll("input:checked")].map((box) => box.value);
        if (chosen.length >= 2) location.hash = "#/compare/" + chosen.map(encodeURIComponent).join(",");
      },
    }, "compare checked runs");
    const table = el("table", { id: "runs" }, el("thead", {}, el("tr", {}, el("th"), heads)), body);
    show("runs", el("p", {}, filter, " ", compare), table, el("p", { class: "note", id: "count" }));

    function cells(run) {
      const chain = [];
      if (run.resumed_from) chain.push("resumed from ", runLink(run.resumed_from), " ");
      if (run.continued_in) chain.push("continued in ", runLink(run.continued_in));
      const steps = run.steps_done === null ? "" :
        run.steps_done + (run.steps_total ? " / " + run.steps_total : "");
      return [
        el("td", {}, el("input", { type: "checkbox", value: run.id })),
        el("td", {}, runLink(run.id, run.id === "." ? run.name : run.id)),
        el("td", { class: "status-" + run.status }, run.status),
        el("td", {}, run.engine || ""), el("td", {}, run.algorithm || ""),
        el("td", {}, run.model || ""), el("td", {}, run.started || ""),
        el("td", { class: "number" }, steps),
        el("td", { class: "number" }, number(run.last_reward)),
        el("td", {}, chain),
      ];
    }

    function fill() {
      const checked = new Set([...body.querySelectorAll("input:checked")].map((box) => box.value));
      const shown = state.runs.filter((run) => !state.filter ||
        RUN_COLUMNS.some(([key]) => String(run[key] ?? "").toLowerCase().includes(state.filter)));
      const key = state.sort;
      shown.sort((a, b) => {
        const x = a[key] ?? "", y = b[key] ?? "";
        const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
        return state.descending ? -order : order;
      });
      body.replaceChildren(...shown.map((run) => {
        const row = el("tr", { "data-run": run.id, "data-status": run.status }, cells(run));
        const box = row.querySelector("input");
        box.checked = checked.has(run.id);
        return row;
      }));
      document.getElementById("count").textContent = shown.length + " of " + state.runs.length + " runs";
    }

    const load = async () => {
      const answer = await ask("runs");
      state.runs = answer ? answer.runs : [];
      fill();
      return !EXPORTED;
    };
    await load();
    if (!EXPORTED) every(2 * LIVE_MS, load);
  }

  // ---- a run ----
  function shownCurve(key) {
    return CURVES.includes(key) || key.startsWith("eval_");
  }

  function curveOrder(a, b) {
    const rank = (key) => (CURVES.includes(key) ? CURVES.indexOf(key) : CURVES.length);
    return rank(a) - rank(b) || a.localeCompare(b);
  }

  function layout(title) {
    return {
      title: { text: title, font: { size: 14 } }, margin: { l: 50, r: 10, t: 30, b: 35 },
      xaxis: { title: { text: "step" } }, showlegend: false,
    };
  }

  function noteOf(curve) {
    if (curve.total === null) return "a preview: a step every so often";
    return curve.total > curve.steps.length
      ? curve.total + " steps drawn as " + curve.steps.length + " points (lowest and highest of each stretch)"
      : "";
  }

  // Markers while a curve is short enough to tell its points apart; a line beyond.
  function trace(name, curve) {
    const short = curve.steps.length <= 200;
    return { x: curve.steps, y: curve.values, mode: short ? "lines+markers" : "lines",
      marker: { size: 4 }, name, type: "scatter" };
  }

  async function runPage(id) {
    const detail = await ask("run", { run: id });
    if (!detail) return show("no run", el("p", {}, "No run " + id + " here."));
    const curves = el("div", { class: "curves", id: "curves" });
    const live = el("p", { class: "note", id: "live" });
    show(id,
      el("h2", {}, "run ", detail.name, " ", el("span", { class: "status-" + detail.status, id: "status" }, detail.status)),
      summaryTable(detail),
      el("p", {}, el("a", { href: "#/episodes/" + encodeURIComponent(id), id: "episodes-link" },
        "episodes: the recorded samples of each step")),
      el("h2", {}, "curves"), live, curves,
      evalsSection(detail.evals),
      el("h2", {}, "effective settings"), keyValues(detail.settings, "settings"),
      el("h2", {}, "checkpoints"),
      detail.checkpoints.length ? el("ul", {}, detail.checkpoints.map((c) => el("li", {}, c))) : el("p", { class: "note" }, "none"),
      el("h2", {}, "job as saved"), el("pre", { id: "job" }, detail.job || "(no job.yaml)"));

    const plots = {};
    let next = 0;
    const update = async () => {
      const answer = await ask("metrics", { run: id, after: next });
      if (!answer) return false;
      if (next > 0) { // how the run stands: its status and steps change while it trains
        const now = await ask("run", { run: id });
        if (now) {
          document.getElementById("summary").replaceWith(summaryTable(now));
          const status = document.getElementById("status");
          status.textContent = now.status;
          status.className = "status-" + now.status;
        }
      }
      for (const key of Object.keys(answer.curves).filter(shownCurve).sort(curveOrder)) {
        const curve = answer.curves[key];
        if (plots[key] && !preview) {
          Plotly.extendTraces(plots[key], { x: [curve.steps], y: [curve.values] }, [0]);
        } else {
          if (!plots[key]) {
            plots[key] = el("div", { class: "curve", "data-metric": key });
            curves.append(plots[key]);
          }
          Plotly.react(plots[key], [trace(key, curve)], layout(key), { displaylogo: false, responsive: true });
          plots[key].setAttribute("title", noteOf(curve));
        }
      }
      preview = Boolean(answer.partial);
      next = answer.next;
      live.textContent = preview ? "a preview: reading the whole run" :
        next + " logged records" + (EXPORTED ? " (exported)" : "; updating live");
      return !EXPORTED;
    };
    let preview = false;
    await update();
    // A large run is first drawn from a preview; the whole of it follows at once.
    if (preview) await update();
    if (!EXPORTED) every(LIVE_MS, update);
  }

  function summaryTable(run) {
    const rows = [
      ["engine", run.engine], ["algorithm", run.algorithm], ["model", run.model],
      ["device", run.device], ["precision", run.precision], ["started", run.started],
      ["ended", run.ended],
      ["steps", run.steps_done === null ? "" : run.steps_done + (run.steps_total ? " / " + run.steps_total : "")],
      ["last reward", number(run.last_reward)], ["error", run.error],
    ];
    const table = el("table", { id: "summary" });
    for (const [label, value] of rows) {
      if (value) table.append(el("tr", {}, el("th", {}, label), el("td", {}, value)));
    }
    if (run.resumed_from) table.append(el("tr", {}, el("th", {}, "resumed from"), el("td", {}, runLink(run.resumed_from))));
    if (run.continued_in) table.append(el("tr", {}, el("th", {}, "continued in"), el("td", {}, runLink(run.continued_in))));
    return table;
  }

  function keyValues(mapping, id) {
    const entries = Object.entries(mapping || {});
    if (!entries.length) return el("p", { class: "note" }, "none recorded");
    return el("table", { id }, entries.map(([key, value]) =>
      el("tr", {}, el("th", {}, key), el("td", {}, typeof value === "object" && value !== null ? JSON.stringify(value) : String(value)))));
  }

  // The eval results side by side, as `eval --compare` prints them: a column per result.
  function evalsSection(evals) {
    if (!evals.length) return el("div");
    const figures = [["mean reward", (r) => r.mean_reward], ["rows", (r) => r.rows]];
    const names = new Set();
    evals.forEach((r) => Object.keys(r.rewards || {}).forEach((n) => names.add(n)));
    names.forEach((n) => figures.push(["reward " + n, (r) => (r.rewards || {})[n]]));
    if (evals.some((r) => r.pass_at_k !== null && r.pass_at_k !== undefined)) figures.push(["pass@k", (r) => r.pass_at_k]);
    return el("div", {},
      el("h2", {}, "eval results"),
      el("table", { id: "evals" },
        el("tr", {}, el("th"), evals.map((r) => el("th", {}, r.model + " on " + r.dataset))),
        figures.map(([label, figure]) => el("tr", {}, el("th", {}, label),
          evals.map((r) => el("td", { class: "number" }, number(figure(r))))))));
  }

  // ---- episodes ----
  async function episodesPage(id, params) {
    const form = el("form", { class: "search", id: "search" },
      "step ", el("input", { name: "step", type: "number", value: params.get("step") || "", size: 6 }),
      "reward at least ", el("input", { name: "min_reward", type: "number", step: "any", value: params.get("min_reward") || "" }),
      "text ", el("input", { name: "q", type: "search", value: params.get("q") || "" }),
      el("button", { type: "submit" }, "search"));
    form.onsubmit = (event) => {
      event.preventDefault();
      const data = Object.fromEntries(new FormData(form).entries());
      location.hash = "#/episodes/" + encodeURIComponent(id) + "?" + query(data);
    };
    const found = el("div", { id: "found" });
    show(id + " episodes", el("h2", {}, "episodes of ", runLink(id)), form, found);
    const answer = await ask("samples", {
      run: id, step: params.get("step"), min_reward: params.get("min_reward"), q: params.get("q"),
    });
    if (!answer) {
      found.append(el("p", { class: "note" }, EXPORTED
        ? "This exported page holds the latest samples only: searching needs aworld-train view."
        : "No run " + id + " here."));
      return;
    }
    found.append(el("p", { class: "note" }, answer.matches + " of " + answer.total + " samples match" +
      (answer.matches > answer.samples.length ? "; the newest " + answer.samples.length + " shown" : "")));
    found.append(el("table", { id: "samples" },
      el("tr", {}, ["step", "reward", "prompt", "completion", "tokens"].map((h) => el("th", {}, h))),
      answer.samples.map((s) => el("tr", {
        class: "link", "data-index": s.index,
        onclick: () => { location.hash = "#/episode/" + encodeURIComponent(id) + "/" + s.index; },
      }, el("td", { class: "number" }, s.step), el("td", { class: "number" }, number(s.reward)),
      el("td", {}, s.prompt), el("td", {}, s.completion), el("td", {}, s.tokens ? "recorded" : "")))));
  }

  function turn(role, ...content) {
    return el("div", { class: "turn " + role }, el("span", { class: "role" }, role), content);
  }

  // A message as a turn: a tool's result says which tool answered.
  function messageTurn(message) {
    const label = message.role + (message.role === "tool" && message.name ? " " + message.name : "");
    return el("div", { class: "turn " + message.role }, el("span", { class: "role" }, label),
      messageText(message.content), toolCalls(message));
  }

  function toolCalls(message) {
    return (message.tool_calls || []).map((call) => {
      const fn = call.function || call;
      const args = typeof fn.arguments === "string" ? fn.arguments : JSON.stringify(fn.arguments);
      return el("span", { class: "tool-call" }, "calls " + fn.name + "(" + args + ")");
    });
  }

  function messageText(content) {
    if (typeof content === "string") return content;
    if (Array.isArray(content)) return content.map((part) => part.text || JSON.stringify(part)).join("");
    return content === null || content === undefined ? "" : JSON.stringify(content);
  }

  async function episodePage(id, index) {
    const sample = await ask("sample", { run: id, index });
    if (!sample) return show("no sample", el("p", {}, "No sample " + index + " of run " + id + " here."));
    const rewards = Object.entries(sample.rewards || {}).map(([n, v]) => n + " " + number(v)).join(", ");
    const parts = [
      el("h2", {}, "episode of ", runLink(id), ", step " + sample.step),
      el("p", {}, "reward " + number(sample.reward) + (rewards ? " (" + rewards + ")" : "")),
    ];
    const episode = sample.episode;
    if (Array.isArray(sample.prompt)) {
      parts.push(el("h2", {}, "prompt"), sample.prompt.map(messageTurn));
    } else {
      parts.push(el("h2", {}, "prompt"), turn("user", String(sample.prompt ?? "")));
    }
    if (episode) {
      parts.push(el("h2", {}, "turns"), el("div", { id: "turns" },
        (episode.messages || []).map(messageTurn)));
      parts.push(el("h2", {}, "tokens"), tokenLegend(), tokenView(episode));
    } else {
      parts.push(el("h2", {}, "completion"), turn("assistant", String(sample.completion ?? "")),
        el("p", { class: "note" }, "This engine recorded the episode's text only, not its tokens."));
    }
    show(id + " step " + sample.step, ...parts);
  }

  function tokenLegend() {
    return el("p", { class: "legend" },
      el("span", { class: "tokens" }, el("span", { class: "trained" }, "trained on (mask 1)")),
      el("span", { class: "tokens" }, el("span", { class: "context" }, "context (mask 0)")),
      el("span", { class: "note" }, "a trained token's shade is its probability; hover for its log-prob"));
  }

  // Every response token, trained (the model's, mask 1) or context (tool results and the
  // template around them, mask 0); a trained token shaded by the probability it was sampled
  // with.
  function tokenView(episode) {
    const view = el("div", { class: "tokens", id: "tokens" });
    if (episode.prompt_text) view.append(el("span", { class: "context", title: "prompt" }, episode.prompt_text));
    episode.tokens.forEach((text, i) => {
      const trained = episode.mask[i] === 1;
      const logprob = episode.logprobs ? episode.logprobs[i] : null;
      const span = el("span", {
        class: trained ? "trained" : "context",
        title: trained && logprob !== null ? "log-prob " + logprob.toFixed(3) : "context",
      }, text);
      if (trained && logprob !== null) span.style.setProperty("--shade", (0.15 + 0.6 * Math.exp(logprob)).toFixed(2));
      view.append(span);
    });
    return view;
  }

  // ---- compare ----
  async function comparePage(ids) {
    // The whole of each run (a large one answers a preview first).
    const whole = async (id) => {
      let answer = await ask("metrics", { run: id, after: 0 });
      while (answer && answer.partial) answer = await ask("metrics", { run: id, after: 0 });
      return answer;
    };
    const answers = await Promise.all(ids.map(whole));
    if (answers.some((a) => !a)) {
      return show("compare", el("p", {}, EXPORTED
        ? "Comparing runs needs aworld-train view." : "One of these runs is not here: " + ids.join(", ")));
    }
    const keys = [...new Set(answers.flatMap((a) => Object.keys(a.curves)))].sort(curveOrder);
    const chosen = keys.includes("reward") ? "reward" : keys[0];
    const select = el("select", { id: "metric", onchange: () => draw(select.value) },
      keys.map((k) => el("option", { value: k }, k)));
    select.value = chosen;
    const plot = el("div", { class: "curve", id: "compare-plot", style: "height: 420px" });
    show("compare", el("h2", {}, "compare ", ids.map((id) => [runLink(id), " "])),
      el("p", {}, "metric ", select), plot);
    function draw(key) {
      const traces = ids.map((id, i) => {
        return trace(id, answers[i].curves[key] || { steps: [], values: [] });
      });
      Plotly.react(plot, traces, Object.assign(layout(key), { showlegend: true, legend: { orientation: "h" } }),
        { displaylogo: false, responsive: true });
    }
    if (chosen) draw(chosen);
  }

  // ---- routing ----
  async function route() {
    clearTimeout(timer);
    generation += 1;
    if (EXPORTED && (location.hash === "" || location.hash === "#")) location.hash = "#/" + EXPORTED.start;
    const [path, search] = location.hash.replace(/^#\/?/, "").split("?");
    const params = new URLSearchParams(search || "");
    const [page, ...rest] = path.split("/");
    const id = rest.length ? decodeURIComponent(rest[0]) : "";
    try {
      if (page === "run") await runPage(id);
      else if (page === "episodes") await episodesPage(id, params);
      else if (page === "episode") await episodePage(id, rest[1]);
      else if (page === "compare") await comparePage(rest[0].split(",").map(decodeURIComponent));
      else await runsPage();
    } catch (error) {
      show("error", el("p", { class: "status-failed" }, "Could not load this page: " + error.message));
    }
  }

  window.addEventListener("hashchange", route);
  window.addEventListener("DOMContentLoaded", route);
})();
