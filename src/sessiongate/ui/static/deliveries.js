// The dead-letter page (`#/deliveries`): outbound messages the platform refused
// (`/v1/deliveries?status=failed`: `failed` ones are still retried, `dead` ones were given up),
// with the platform's reason, their age and where they were going; retry one or all. The list
// follows the live feed (`delivery.failed`) and is read again every little while besides,
// since a background retry that succeeds sends no event.

const LISTED = 200;

function age(iso, now = Date.now()) {
  const seconds = Math.max(0, Math.round((now - new Date(iso).getTime()) / 1000));
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
  return `${Math.floor(seconds / 86_400)} d ${Math.floor((seconds % 86_400) / 3600)} h`;
}

export function deadLettersView(main, kit) {
  const { h, api, report, when, toast, plural } = kit;
  const summary = h("p", { class: "summary", id: "dead-summary", "aria-live": "polite" });
  const retryAll = h("button", {
    type: "button", id: "retry-all", text: "Retry all", disabled: true,
    onclick: async () => {
      retryAll.disabled = true;
      const result = await report(api("POST", "/v1/deliveries/retry"));
      if (result) toast(`Retried ${plural(result.retried, "delivery", "deliveries")}: ${result.sent} sent`);
      await refresh();
    },
  });
  const table = h("table", { id: "dead-letters" },
    h("caption", { text: "Undelivered messages" }),
    h("thead", {}, h("tr", {}, ["Status", "Target", "Session", "Kind", "Reason", "Tries", "Age", "Message", ""]
      .map((t) => h("th", { scope: "col", text: t })))),
    h("tbody"));
  main.append(h("h1", { text: "Dead letters" }), h("div", { class: "toolbar" }, summary, retryAll), table);

  function row(item) {
    return h("tr", { dataset: { delivery: item.id, status: item.status } },
      h("td", {}, h("span", { class: `badge delivery-${item.status}`, text: item.status })),
      h("td", { class: "wrap", text: `${item.platform}:${item.chat_id}` }),
      h("td", { class: "wrap" }, item.session_key
        ? h("a", { href: `#/s/${encodeURIComponent(item.session_key)}`, text: item.session_key }) : "—"),
      h("td", { text: item.turn_id ? `${item.kind} (turn #${item.turn_id})` : item.kind }),
      h("td", { class: "wrap reason", text: item.reason || "" }),
      h("td", { text: String(item.attempts) }),
      h("td", { class: "age" }, h("span", { title: item.created_at, text: age(item.created_at) })),
      h("td", { class: "wrap preview-cell", text: item.preview }),
      h("td", {}, h("button", {
        type: "button", class: "quiet", text: "Retry",
        onclick: async (event) => {
          event.target.disabled = true;
          const after = await report(api("POST", `/v1/deliveries/${item.id}/retry`));
          if (after) toast(after.status === "sent" ? "Sent" : `Still ${after.status}: ${after.reason || "refused"}`);
          await refresh();
        },
      })));
  }

  let refreshes = 0;
  async function refresh() {
    const mine = ++refreshes;
    const result = await report(api("GET", `/v1/deliveries?status=failed&limit=${LISTED}`));
    if (!result || mine !== refreshes) return;
    const { failed = 0, dead = 0 } = result.counts;
    summary.textContent = `${plural(failed, "failed delivery", "failed deliveries")} (retried by themselves), ${dead} dead`;
    retryAll.disabled = result.deliveries.length === 0;
    table.querySelector("tbody").replaceChildren(...(result.deliveries.length ? result.deliveries.map(row)
      : [h("tr", {}, h("td", { colspan: 9, class: "muted", text: "nothing undelivered" }))]));
  }

  // Stops by itself once another page replaced this one.
  const timer = setInterval(() => (table.isConnected ? refresh() : clearInterval(timer)), kit.pollMs * 3);
  const refreshSoon = kit.debounce(refresh, 300);
  return {
    refresh,
    onEvent: (event) => {
      if (event.type === "delivery.failed" || event.type === "turn.finished") refreshSoon();
    },
  };
}
