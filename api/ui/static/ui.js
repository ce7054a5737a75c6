// gitfleet web UI: our own small script, no library. It (1) sends the action forms after a
// confirmation and shows the answer in place, (2) polls the cheap JSON endpoints to update
// statuses without reloading, (3) loads an object's children (ReplicaSets, Pods) on demand.
"use strict";
(function () {
  const POLL_MS = 3000;
  const main = document.getElementById("main");
  const csrf = main ? main.dataset.csrf : "";

  function badge(value) {
    const span = document.createElement("span");
    span.className = "badge s-" + String(value).toLowerCase();
    span.textContent = value;
    return span;
  }

  function setField(scope, field, value, asBadge) {
    const cell = scope.querySelector('[data-field="' + field + '"]');
    if (!cell) return;
    if (asBadge) {
      if (cell.textContent.trim() === String(value)) return;
      cell.replaceChildren(badge(value));
    } else if (cell.textContent !== String(value)) {
      cell.textContent = value;
    }
  }

  function notify(text, isError) {
    const box = document.getElementById("notice");
    if (!box) return;
    box.hidden = false;
    box.className = "notice" + (isError ? " error" : "");
    box.textContent = text;
  }

  async function send(form) {
    const body = new URLSearchParams(new FormData(form));
    const answer = await fetch(form.action, {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: { Accept: "application/json", "X-CSRF-Token": csrf },
    });
    let data = {};
    try { data = await answer.json(); } catch (e) { data = { detail: answer.statusText }; }
    if (!answer.ok) {
      notify(data.detail || "refused (" + answer.status + ")", true);
      return;
    }
    notify(data.message || "done", false);
    if (form.action.endsWith("/delete") && form.action.includes("/ui/apps/")) {
      window.location.assign("/ui/");
    } else if (form.action.includes("/ui/clusters")) {
      window.location.reload();
    } else {
      poll(true);
    }
  }

  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.confirm) return;
    event.preventDefault();
    if (!window.confirm(form.dataset.confirm)) return;
    send(form).catch(function (e) { notify("request failed: " + e, true); });
  });

  function updateApps(table, data) {
    const body = table.tBodies[0];
    const names = data.rows.map(function (r) { return r.name; });
    const shown = Array.from(body.querySelectorAll("tr[data-app]")).map(function (tr) { return tr.dataset.app; });
    if (names.join("\n") !== shown.join("\n")) {
      window.location.reload();  // apps came or went: the server renders the new page
      return;
    }
    data.rows.forEach(function (r) {
      const row = body.querySelector('tr[data-app="' + CSS.escape(r.name) + '"]');
      if (!row) return;
      setField(row, "sync_status", r.sync_status, true);
      setField(row, "health", r.health, true);
      setField(row, "message", r.message, false);
      const time = row.querySelector('[data-field="last_sync"] time');
      if (time && time.textContent !== r.last_sync) time.textContent = r.last_sync;
      const rev = row.querySelector('[data-field="revision"] a, [data-field="revision"] code');
      if (rev && rev.textContent !== r.short_revision) rev.textContent = r.short_revision;
    });
    Object.keys(data.counts).concat(Array.from(document.querySelectorAll("[data-count]")).map(function (e) { return e.dataset.count; }))
      .forEach(function (h) {
        const cell = document.querySelector('[data-count="' + h + '"]');
        if (cell) cell.textContent = data.counts[h] || 0;
      });
    const total = document.getElementById("total");
    if (total) total.textContent = data.total;
  }

  function updateApp(box, data) {
    setField(box, "sync_status", data.sync_status, true);
    setField(box, "health", data.health, true);
    setField(box, "revision", (data.revision || "").slice(0, 8), false);
    data.instances.forEach(function (inst) {
      const section = document.querySelector('section[data-cluster="' + CSS.escape(inst.cluster) + '"]');
      if (!section) return;
      const head = section.querySelector("p");
      setField(head, "sync_status", inst.sync_status, true);
      setField(head, "health", inst.health, true);
      setField(head, "revision", (inst.revision || "").slice(0, 8), false);
      setField(section, "message", inst.message, false);
      inst.resources.forEach(function (r) {
        const row = section.querySelector('tr[data-ref="' + CSS.escape(r.ref) + '"]');
        if (!row) return;
        setField(row, "health", r.health, true);
        setField(row, "action", r.action, false);
        setField(row, "message", r.message, false);
      });
    });
  }

  let busy = false;
  async function poll(now) {
    if (busy || (document.hidden && !now)) return;
    const target = document.querySelector("[data-poll]");
    if (!target) return;
    busy = true;
    try {
      const answer = await fetch(target.dataset.poll, { credentials: "same-origin", headers: { Accept: "application/json" } });
      if (answer.status === 401) { window.location.assign("/ui/login"); return; }
      if (answer.status === 404) { notify("this application no longer exists", true); return; }
      if (!answer.ok) return;
      const data = await answer.json();
      if (target.tagName === "TABLE") updateApps(target, data); else updateApp(target, data);
    } catch (e) {
      // the coordinator restarting: try again at the next tick
    } finally {
      busy = false;
    }
  }
  // Poll again POLL_MS after the last answer, or longer when the answer was slow (a big
  // fleet, a busy coordinator): never more than a fifth of the coordinator's time per page.
  async function loop() {
    const started = Date.now();
    await poll(false);
    window.setTimeout(loop, Math.max(POLL_MS, 5 * (Date.now() - started)));
  }
  if (document.querySelector("[data-poll]")) window.setTimeout(loop, POLL_MS);

  document.addEventListener("click", async function (event) {
    const button = event.target.closest("button[data-children]");
    if (!button) return;
    const row = button.closest("tr");
    if (button.getAttribute("aria-expanded") === "true") {
      row.parentNode.querySelectorAll('tr[data-child-of="' + CSS.escape(row.dataset.ref) + '"]').forEach(function (r) { r.remove(); });
      button.setAttribute("aria-expanded", "false");
      button.textContent = "show children";
      return;
    }
    const answer = await fetch(button.dataset.children, { credentials: "same-origin" });
    const data = await answer.json();
    if (data.error) { notify(data.error, true); return; }
    let after = row;
    data.children.forEach(function (c) {
      const tr = document.createElement("tr");
      tr.className = "child depth-" + c.depth;
      tr.dataset.childOf = row.dataset.ref;
      [c.kind, c.namespace, c.name, null, "", c.message].forEach(function (text, i) {
        const td = document.createElement("td");
        if (i === 3) td.appendChild(badge(c.health)); else td.textContent = text;
        if (i === 0) td.textContent = (c.depth > 1 ? "\u2514\u2500\u2500 " : "\u2514 ") + c.kind;
        tr.appendChild(td);
      });
      after.after(tr);
      after = tr;
    });
    if (!data.children.length) notify("no children found in the cluster", false);
    button.setAttribute("aria-expanded", "true");
    button.textContent = "hide children";
  });
})();
