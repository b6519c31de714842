// Small DOM helpers: elements are built with textContent only (never innerHTML), so run
// content written by others is always shown as text.

/** h("a", {href: "#/runs", class: "x", onclick: fn}, "text", child) */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else if (name === "text") el.textContent = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace every child of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A time in the viewer's local time, with the ISO value on hover. */
export function time(iso, { relative = false } = {}) {
  if (!iso) return h("span", { text: "—" });
  const date = new Date(iso);
  const local = date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
  return h("time", { datetime: iso, title: iso }, relative ? `${age(date)} ago` : local);
}

/** "12 s", "5 min", "3 h", "2 d". */
export function age(date) {
  const seconds = Math.max(0, Math.round((Date.now() - date.getTime()) / 1000));
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h`;
  return `${Math.floor(seconds / 86400)} d`;
}

export function badge(status) {
  return h("span", { class: `badge badge-${status}` }, status);
}

/** JSON, shown as preformatted text in a scrollable, focusable block. */
export function json(value, label) {
  return h("pre", { class: "json", tabindex: "0", "aria-label": label }, JSON.stringify(value ?? null, null, 2));
}

/** Say something to screen-reader users (and tests) without moving focus. */
export function announce(message) {
  const region = document.getElementById("announcer");
  if (region) region.textContent = message;
}

/** A message for a state: loading, empty or error (role=alert), with an optional retry. */
export function notice(kind, text, retry) {
  const attrs = kind === "error" ? { class: "notice notice-error", role: "alert" } : { class: `notice notice-${kind}`, role: "status" };
  return h("div", attrs, h("p", {}, text), retry ? h("button", { type: "button", onclick: retry }, "Try again") : null);
}

/** A URL as operators may see it: scheme, host and path; never credentials, query or fragment. */
export function safeUrl(raw) {
  try {
    const url = new URL(raw);
    const hidden = url.search || url.hash || url.username || url.password ? " (query hidden)" : "";
    return `${url.protocol}//${url.host}${url.pathname}${hidden}`;
  } catch {
    return "(not a URL)";
  }
}

/** Call `fn` every `ms` while the page is visible; returns a function that stops it. */
export function every(ms, fn) {
  let stopped = false;
  let timer = 0;
  const tick = async () => {
    if (stopped) return;
    if (document.visibilityState === "visible") {
      try {
        await fn();
      } catch {
        // the view shows its own error; keep polling
      }
    }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  timer = setTimeout(tick, ms);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
