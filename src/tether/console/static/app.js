// The console's shell: sign-in and sign-out, what the key may do, and the hash router
// (#/runs, #/runs/<id>, #/deliveries). Each view returns a function that stops its work.

import { ApiError, abilities, forget, remember, storedKey } from "./api.js";
import { announce, fill, h, notice } from "./dom.js";
import { deliveriesView } from "./deliveries.js";
import { runView } from "./run.js";
import { runsView } from "./runs.js";

const main = document.getElementById("main");
const ctx = { can: null };
let stop = () => {};

function describe(can) {
  const parts = ["read runs"];
  if (can.answer) parts.push("answer");
  if (can.cancel) parts.push("cancel");
  if (can.deliveries) parts.push("deliveries");
  return can.answer || can.cancel || can.deliveries ? `Signed in: ${parts.join(", ")}` : "Signed in: read-only";
}

function chrome() {
  const signedIn = ctx.can !== null;
  document.getElementById("nav").hidden = !signedIn;
  document.getElementById("who").hidden = !signedIn;
  document.getElementById("nav-deliveries").parentElement.hidden = !(signedIn && ctx.can.deliveries);
  document.getElementById("who-text").textContent = signedIn ? describe(ctx.can) : "";
}

function signInView() {
  document.title = "Sign in · Tether console";
  const input = h("input", { id: "api-key", name: "api-key", type: "password", autocomplete: "off", spellcheck: "false", required: true, "aria-describedby": "api-key-help" });
  const error = h("p", { class: "error", role: "alert", id: "sign-in-error" });
  const button = h("button", { type: "submit" }, "Sign in");
  const form = h(
    "form",
    { class: "card sign-in", "aria-labelledby": "sign-in-title" },
    h("h1", { id: "sign-in-title" }, "Sign in"),
    h("label", { for: "api-key" }, "API key"),
    input,
    h("p", { id: "api-key-help", class: "help" }, "A key from tether keys create. It is kept in this browser tab only and forgotten when you sign out or close the tab."),
    button,
    error,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (!key) return;
    button.disabled = true;
    error.textContent = "";
    remember(key);
    try {
      ctx.can = await abilities();
      input.value = "";
      announce("Signed in");
      if (!location.hash.startsWith("#/")) location.hash = "#/runs";
      else route();
    } catch (e) {
      forget();
      ctx.can = null;
      error.textContent = e instanceof ApiError && e.status === 401 ? `That key was refused: ${e.message}` : e.status === 403 ? `This key cannot read runs: ${e.message}` : e.message;
      button.disabled = false;
      input.focus();
    }
  });
  fill(main, form);
  input.focus();
  return () => {};
}

function route() {
  stop();
  chrome();
  const hash = location.hash;
  if (ctx.can === null) {
    stop = signInView();
    return;
  }
  const run = /^#\/runs\/([^/?]+)$/.exec(hash);
  if (run) stop = runView(main, ctx, decodeURIComponent(run[1]));
  else if (hash.startsWith("#/deliveries")) stop = deliveriesView(main, ctx);
  else stop = runsView(main, ctx);
  for (const link of document.querySelectorAll("#nav a")) {
    const current = hash.startsWith(link.getAttribute("href"));
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

function signOut() {
  stop();
  stop = () => {};
  forget();
  ctx.can = null;
  history.replaceState(null, "", "/console");
  route();
  announce("Signed out; the key is forgotten");
}

async function boot() {
  document.getElementById("sign-out").addEventListener("click", signOut);
  document.getElementById("skip").addEventListener("click", (event) => {
    event.preventDefault();
    main.focus();
  });
  window.addEventListener("hashchange", () => {
    if (location.hash === "" || location.hash.startsWith("#/")) route();
  });
  if (storedKey()) {
    try {
      ctx.can = await abilities();
    } catch (e) {
      if (e instanceof ApiError && (e.status === 401 || e.status === 403)) forget();
      else {
        fill(main, notice("error", `The console could not reach the host: ${e.message}`, () => location.reload()));
        return;
      }
    }
  }
  route();
}

boot();
