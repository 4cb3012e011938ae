// The jobs page (`#/jobs`): scheduled jobs over `/v1/jobs`. Lists each job with its schedule,
// target, agent, next run, whether it is paused and how its latest run went; adds one from a
// form (the API's refusal is shown beside the form, word for word); pauses, resumes, runs now
// or removes one; and shows a job's history, each run with its turn and its reply's delivery.

const SCHEDULES = ["cron", "every", "at"];
const TARGETS = ["session_key", "deliver_to"];

export function jobsView(main, kit) {
  const { h, api, report, when, toast, confirmDialog } = kit;
  const jobPath = (id, rest = "") => `/v1/jobs/${encodeURIComponent(id)}${rest}`;
  let shown = null; // the job whose history is open

  const table = h("table", { id: "job-list", "aria-label": "Jobs" },
    h("thead", {}, h("tr", {}, ["Job", "Schedule", "Target", "Agent", "Next run", "State", "Last run", ""]
      .map((t) => h("th", { scope: "col", text: t })))),
    h("tbody"));
  const history = h("section", { id: "job-history", hidden: true, "aria-live": "polite" });

  // ----------------------------------------------------------------------------- the form
  const field = (label, input) => h("label", { class: "field" }, h("span", { text: label }), input);
  const select = (name, values, label) => h("select", { name, "aria-label": label },
    values.map((v) => h("option", { value: v, text: v })));
  const error = h("p", { id: "job-error", class: "form-error", role: "alert", hidden: true });
  const form = h("form", { id: "job-form", class: "job-form", novalidate: true, onsubmit: create },
    h("h2", { text: "Add a job" }),
    field("Id", h("input", { name: "id", required: true, placeholder: "daily-digest", autocomplete: "off" })),
    field("Schedule", h("span", { class: "pair" },
      select("schedule_kind", SCHEDULES, "Schedule kind"),
      h("input", { name: "schedule", placeholder: "0 9 * * mon-fri · 30m · 2030-01-01T09:00", "aria-label": "Schedule" }))),
    field("Time zone", h("input", { name: "timezone", value: "UTC" })),
    field("Target", h("span", { class: "pair" },
      select("target_kind", TARGETS, "Target kind"),
      h("input", { name: "target", placeholder: "agent:main:… or telegram:12345", "aria-label": "Target" }))),
    field("Session", select("session", ["shared", "isolated"], "Session (with deliver_to)")),
    field("Agent", h("input", { name: "agent", placeholder: "(the target's own)" })),
    field("Prompt", h("textarea", { name: "prompt", rows: 3 })),
    h("label", {}, h("input", { type: "checkbox", name: "paused" }), " start paused"),
    error,
    h("button", { type: "submit", text: "Add job" }));

  main.append(h("h1", { text: "Jobs" }), table, history, form);

  async function create(event) {
    event.preventDefault();
    const data = new FormData(form);
    const text = (name) => String(data.get(name) || "").trim();
    // Empty fields are left out: the API says what is missing, in its own words.
    const body = { id: text("id"), prompt: text("prompt") };
    if (text("schedule")) body[text("schedule_kind")] = text("schedule");
    if (text("target")) body[text("target_kind")] = text("target");
    if (text("timezone")) body.timezone = text("timezone");
    if (text("agent")) body.agent = text("agent");
    // `isolated` (a fresh session per run) is for `deliver_to` only; the API says so if not.
    if (text("session") === "isolated") body.session = "isolated";
    if (data.get("paused") === "on") body.paused = true;
    try {
      const job = await api("POST", "/v1/jobs", body);
      error.hidden = true;
      error.textContent = "";
      form.reset();
      toast(`Job ${job.id} added`);
      await refresh();
    } catch (failure) {
      error.textContent = failure instanceof kit.ApiError ? `${failure.message} (${failure.code})` : String(failure);
      error.hidden = false;
    }
  }

  // ----------------------------------------------------------------------------- the list
  const scheduleOf = (job) => job.cron ? `cron ${job.cron}${job.timezone && job.timezone !== "UTC" ? ` (${job.timezone})` : ""}`
    : job.every ? `every ${job.every}` : job.at ? `at ${job.at}` : "?";
  const targetOf = (job) => job.session_key || `${job.deliver_to}${job.session === "isolated" ? " (isolated)" : ""}`;
  const runStatus = (run) => !run ? h("span", { class: "muted", text: "never" })
    : h("span", { class: "run-status" },
      run.turn_state || run.state,
      run.delivery_status ? h("span", { class: `badge delivery-${run.delivery_status}`, text: run.delivery_status }) : null,
      " ", when(run.claimed_at));

  async function act(promise, done) {
    const result = await report(promise, done);
    await refresh();
    return result;
  }

  function jobRow(job) {
    return h("tr", { dataset: { job: job.id } },
      h("td", { class: "job-id", text: job.id }),
      h("td", { text: scheduleOf(job) }),
      h("td", { class: "wrap", text: targetOf(job) }),
      h("td", { text: job.agent || "—" }),
      h("td", {}, job.next_at ? when(job.next_at) : h("span", { class: "muted", text: "none" })),
      h("td", { class: "job-state", text: job.paused ? "paused" : "active" }),
      h("td", { class: "last-run" }, runStatus(job.last_run)),
      h("td", { class: "row-actions" },
        h("button", {
          type: "button", class: "quiet", text: job.paused ? "Resume" : "Pause",
          onclick: () => act(api("PATCH", jobPath(job.id), { paused: !job.paused }), job.paused ? "Resumed" : "Paused"),
        }),
        h("button", {
          type: "button", class: "quiet", text: "Run now",
          onclick: async () => {
            const run = await act(api("POST", jobPath(job.id, "/run")));
            if (run) {
              toast(`Run ${run.run_id} of ${job.id}: ${run.state}`);
              showHistory(job.id);
            }
          },
        }),
        h("button", { type: "button", class: "quiet", text: "History", onclick: () => showHistory(job.id) }),
        h("button", {
          type: "button", class: "danger", text: "Remove",
          onclick: async () => {
            if (!(await confirmDialog(`Remove job ${job.id} and its history?`))) return;
            if (shown === job.id) {
              shown = null;
              history.hidden = true;
            }
            await act(api("DELETE", jobPath(job.id)), "Removed");
          },
        })));
  }

  async function showHistory(id) {
    shown = id;
    const result = await report(api("GET", jobPath(id, "/runs?limit=50")));
    if (!result || shown !== id) return;
    const link = (key) => key ? h("a", { href: `#/s/${encodeURIComponent(key)}`, text: key }) : "—";
    history.hidden = false;
    history.dataset.job = id;
    history.replaceChildren(
      h("h2", {}, `History of ${id} `,
        h("button", { type: "button", class: "quiet", text: "Close", onclick: () => { shown = null; history.hidden = true; } })),
      h("table", { id: "run-list" },
        h("thead", {}, h("tr", {}, ["Run", "Slot", "Claimed", "Run state", "Session", "Turn", "Delivery", "Detail"]
          .map((t) => h("th", { scope: "col", text: t })))),
        h("tbody", {}, result.runs.length ? result.runs.map((run) =>
          h("tr", { dataset: { run: run.run_id } },
            h("td", { text: `#${run.run_id}` }),
            h("td", {}, when(run.slot_at)),
            h("td", {}, when(run.claimed_at)),
            h("td", { text: run.state + (run.skipped ? ` (${run.skipped} skipped)` : "") }),
            h("td", { class: "wrap" }, link(run.session_key)),
            h("td", { class: "turn-state", text: run.turn_id ? `#${run.turn_id} ${run.turn_state || ""}` : "—" }),
            h("td", { class: "delivery-status", text: run.delivery_status || "—" }),
            h("td", { class: "wrap", text: run.detail || "" })))
          : h("tr", {}, h("td", { colspan: 8, class: "muted", text: "no runs yet" })))));
  }

  let refreshes = 0;
  async function refresh() {
    const mine = ++refreshes;
    const result = await report(api("GET", "/v1/jobs"));
    if (!result || mine !== refreshes) return;
    const body = table.querySelector("tbody");
    body.replaceChildren(...(result.jobs.length ? result.jobs.map(jobRow)
      : [h("tr", {}, h("td", { colspan: 8, class: "muted", text: "no jobs" }))]));
    if (shown !== null) showHistory(shown);
  }

  // A job's run starts, finishes or fails (`job.*`); its reply may then fail to arrive.
  const refreshSoon = kit.debounce(refresh, 300);
  return {
    refresh,
    onEvent: (event) => {
      if (event.type.startsWith("job.") || event.type === "delivery.failed") refreshSoon();
    },
  };
}
