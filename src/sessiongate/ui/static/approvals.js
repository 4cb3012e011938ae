// The pending-approvals page (`#/approvals`): tool calls waiting for a person's decision
// (`/v1/approvals?status=pending`), each with its conversation, tool, full arguments and the
// times it was asked and expires. Approve and Deny post the decision bound to the call shown
// (`arguments_sha256`), so a decision never applies to another call; a decided one leaves the
// list. The live feed's `approval.requested|decided|expired` events keep the list current.

export function approvalsView(main, kit) {
  const { h, api, report, when, toast, plural } = kit;
  const summary = h("p", { class: "summary", "aria-live": "polite" });
  const list = h("ul", { class: "approvals", id: "approval-list" });
  main.append(h("h1", { text: "Pending approvals" }), summary, list);

  async function decide(item, approval, decision) {
    for (const button of item.querySelectorAll("button")) button.disabled = true;
    const done = await report(
      api("POST", `/v1/approvals/${encodeURIComponent(approval.id)}`, {
        decision, arguments_sha256: approval.arguments_sha256,
      }),
      decision === "approve" ? `Approved ${approval.tool}` : `Denied ${approval.tool}`,
    );
    if (done) item.remove();
    await refresh();
  }

  function entry(approval) {
    const item = h("li", { class: "approval", dataset: { approval: approval.id } },
      h("div", { class: "approval-head" },
        h("span", { class: "tool", text: approval.tool }),
        h("a", { class: "wrap", href: `#/s/${encodeURIComponent(approval.session_key)}`, text: approval.session_key })),
      h("dl", { class: "details" },
        h("dt", { text: "Requested" }), h("dd", {}, when(approval.requested_at)),
        h("dt", { text: "Expires" }), h("dd", {}, when(approval.expires_at)),
        h("dt", { text: "Approvers" }), h("dd", { text: approval.approvers.join(", ") || "the operator" })),
      // Exactly the text the decision binds to: parsing it to indent it could change what it
      // shows (a number past 2**53 would print rounded).
      h("pre", { class: "arguments", text: approval.arguments }));
    item.append(h("div", { class: "row-actions" },
      h("button", { type: "button", text: "Approve", onclick: () => decide(item, approval, "approve") }),
      h("button", { type: "button", class: "danger", text: "Deny", onclick: () => decide(item, approval, "deny") })));
    return item;
  }

  let refreshes = 0;
  async function refresh() {
    const mine = ++refreshes;
    const result = await report(api("GET", "/v1/approvals?status=pending&limit=200"));
    if (!result || mine !== refreshes) return;
    // Oldest first: the one that expires soonest is on top.
    const pending = [...result.approvals].reverse();
    summary.textContent = `${plural(pending.length, "call")} waiting for a decision`;
    list.replaceChildren(...(pending.length ? pending.map(entry)
      : [h("li", { class: "muted", text: "nothing is waiting" })]));
  }

  const refreshSoon = kit.debounce(refresh, 200);
  return {
    refresh,
    onEvent: (event) => {
      if (event.type.startsWith("approval.")) refreshSoon();
    },
  };
}
