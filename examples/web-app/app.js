// fanfuse example app: sign in, start a search through the HTTP API, watch its Firestore
// documents with onSnapshot. Plain ES modules, no build step: index.html's import map points the
// Firebase SDK's browser builds at node_modules. See README.md.
import { initializeApp } from "https://www.gstatic.com/firebasejs/13.2.0/firebase-app.js";
import {
  connectAuthEmulator,
  getAuth,
  signInWithEmailAndPassword,
} from "https://www.gstatic.com/firebasejs/13.2.0/firebase-auth.js";
import {
  collection,
  connectFirestoreEmulator,
  doc,
  getFirestore,
  onSnapshot,
} from "https://www.gstatic.com/firebasejs/13.2.0/firebase-firestore.js";

const TERMINAL = new Set(["completed", "partial", "failed", "cancelled"]);
const $ = (id) => document.getElementById(id);

/** Where things are: config.json (a deployment's), overridden by the page's query string
 *  (`?project=&firestore=&api=&auth=`, what a local stack prints). */
async function loadConfig() {
  let file = {};
  try {
    const answer = await fetch("config.json", { cache: "no-store" });
    if (answer.ok) file = await answer.json();
  } catch {
    // no config.json: the query string says everything
  }
  const params = new URLSearchParams(location.search);
  const firebase = { ...(file.firebase || {}) };
  if (params.get("project")) firebase.projectId = params.get("project");
  if (!firebase.apiKey) firebase.apiKey = "demo-api-key"; // the emulators accept any key
  return {
    firebase,
    startSearchUrl: params.get("api") || file.startSearchUrl,
    firestoreEmulator: params.get("firestore") || file.firestoreEmulator || null,
    authEmulator: params.get("auth") || file.authEmulator || null,
  };
}

/** Without the Auth emulator, the Firestore emulator's mock user: an unsigned Firebase ID token
 *  for `uid` (what the SDK's `mockUserToken` makes), sent to Firestore and, as a bearer token,
 *  to fanfuse, which accepts such tokens only for a `demo-` project it was told to
 *  (FANFUSE_FIREBASE_EMULATOR_TOKENS). */
function mockUserToken(uid, project) {
  const now = Math.floor(Date.now() / 1000);
  const part = (data) =>
    btoa(JSON.stringify(data)).replace(/=+$/, "").replace(/\+/g, "-").replace(/\//g, "_");
  const claims = {
    iss: `https://securetoken.google.com/${project}`,
    aud: project,
    iat: now,
    exp: now + 3600,
    auth_time: now,
    sub: uid,
    user_id: uid,
    firebase: { sign_in_provider: "custom", identities: {} },
  };
  return `${part({ alg: "none", typ: "JWT" })}.${part(claims)}.`;
}

function hostPort(address) {
  const [host, port] = address.replace(/^https?:\/\//, "").split(":");
  return [host, Number(port)];
}

let config;
let session = null; // { uid, db, idToken: () => Promise<string> }
let watching = []; // onSnapshot unsubscribers
let cancelUrl = null;
const platforms = new Map(); // name -> platform document data

async function signIn(event) {
  event.preventDefault();
  stopWatching();
  problem("");
  // One Firebase app per signed-in user: a Firestore instance keeps the credentials it was
  // connected with.
  const app = initializeApp(config.firebase, `user-${Date.now()}`);
  const db = getFirestore(app);
  try {
    if (config.firestoreEmulator && !config.authEmulator) {
      const uid = $("uid").value.trim();
      const token = mockUserToken(uid, config.firebase.projectId);
      const [host, port] = hostPort(config.firestoreEmulator);
      connectFirestoreEmulator(db, host, port, { mockUserToken: token });
      session = { uid, db, idToken: async () => token };
    } else {
      const auth = getAuth(app);
      if (config.authEmulator) connectAuthEmulator(auth, config.authEmulator);
      if (config.firestoreEmulator) {
        const [host, port] = hostPort(config.firestoreEmulator);
        connectFirestoreEmulator(db, host, port);
      }
      const credential = await signInWithEmailAndPassword(
        auth, $("email").value, $("password").value);
      const user = credential.user;
      session = { uid: user.uid, db, idToken: () => user.getIdToken() };
    }
  } catch (error) {
    session = null;
    problem(`Sign-in failed: ${error.message}`);
    return;
  }
  $("who").textContent = `Signed in as ${session.uid}.`;
  $("search-button").disabled = false;
  $("watch-button").disabled = false;
}

async function startSearch(event) {
  event.preventDefault();
  problem("");
  const names = $("platforms").value.trim();
  const body = {
    query: $("query").value,
    platform: names === "" || names === "all" ? "all" : names.split(",").map((s) => s.trim()),
    max_results: Number($("max-results").value),
  };
  let answer;
  try {
    answer = await fetch(config.startSearchUrl, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        Authorization: `Bearer ${await session.idToken()}`,
      },
      body: JSON.stringify(body),
    });
  } catch (error) {
    problem(`The API did not answer: ${error.message}`);
    return;
  }
  const data = await answer.json().catch(() => ({}));
  if (answer.status !== 202) {
    problem(`The search was refused (${answer.status}): ${data.message || JSON.stringify(data)}`);
    return;
  }
  cancelUrl = data.cancel_url || null;
  watch(data.task_id);
}

function watchById(event) {
  event.preventDefault();
  problem("");
  cancelUrl = null;
  watch($("task-id").value.trim());
}

/** Listen to the task document and its platform documents. The rules let only the owner read
 *  them: anyone else's listener ends with `permission-denied`, which the page shows. */
function watch(taskId) {
  stopWatching();
  platforms.clear();
  renderPlatforms();
  $("task").textContent = taskId;
  $("status").textContent = "watching";
  $("results").replaceChildren();
  $("errors").replaceChildren();
  $("summary").textContent = "";
  const refusals = [];
  const denied = (what) => (error) => {
    $("status").textContent = "denied";
    refusals.push(`Denied: ${session.uid} may not read ${what} of search ${taskId} (${error.code}).`);
    problem(refusals.join("\n"));
  };
  const { db } = session;
  watching.push(
    onSnapshot(doc(db, "searches", taskId), (snap) => renderTask(snap.data()), denied("the task document")),
    onSnapshot(
      collection(db, "searches", taskId, "platforms"),
      (query) => {
        for (const change of query.docChanges()) {
          if (change.type === "removed") platforms.delete(change.doc.id);
          else platforms.set(change.doc.id, change.doc.data());
        }
        renderPlatforms();
      },
      denied("the platform documents"),
    ),
  );
}

function stopWatching() {
  for (const unsubscribe of watching) unsubscribe();
  watching = [];
}

async function cancel() {
  if (!cancelUrl) return;
  const answer = await fetch(cancelUrl, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${await session.idToken()}` },
    body: JSON.stringify({ task_id: $("task").textContent }),
  });
  if (!answer.ok) problem(`Cancel refused (${answer.status})`);
}

// -- rendering: every value from a document goes in as text, never as HTML ---------------------

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function problem(text) {
  $("problem").textContent = text;
}

function renderPlatforms() {
  const rows = [...platforms.entries()].sort((a, b) => (a[1].index || 0) - (b[1].index || 0));
  $("platform-list").replaceChildren(
    ...rows.map(([name, run]) => {
      const li = el("li", `state-${run.state}`);
      li.dataset.platform = name;
      li.dataset.state = run.state;
      const bar = el("progress");
      bar.max = 100;
      bar.value = run.percent || 0;
      bar.setAttribute("aria-label", `${name} progress`);
      li.append(el("span", "name", name), el("span", "state", run.state), bar,
        el("span", "message", run.message));
      if (run.error) li.append(el("span", "error", run.error));
      return li;
    }),
  );
  if (rows.length) {
    const percent = rows.reduce((sum, [, run]) => sum + (run.percent || 0), 0) / rows.length;
    showPercent(percent);
  }
}

function showPercent(percent) {
  $("overall-bar").value = percent;
  $("overall").textContent = `${Math.round(percent)}%`;
}

function renderTask(task) {
  if (!task) return;
  $("status").textContent = task.status;
  $("message").textContent = task.progress?.message || "";
  const done = TERMINAL.has(task.status);
  $("cancel").hidden = done || !cancelUrl;
  if (!done) return;
  showPercent(task.progress?.percent ?? 100);
  $("summary").textContent = task.summary?.message || task.error || "";
  $("errors").replaceChildren(
    ...(task.errors || []).map((e) => el("li", null, `${e.platform} ${e.state}: ${e.error}`)),
  );
  $("results").replaceChildren(...(task.results || []).map(resultItem));
}

function resultItem(result) {
  const li = el("li");
  const safe = /^https?:\/\//i.test(result.url);
  const title = el(safe ? "a" : "span", "title", result.title || result.url);
  if (safe) title.href = result.url;
  const from = Object.entries(result.ranks || {})
    .map(([name, rank]) => `${name} #${rank}`)
    .join(" · ");
  li.append(title, el("div", "url", result.url), el("div", "snippet", result.snippet),
    el("div", "from", `from ${from}`));
  return li;
}

// -- start ---------------------------------------------------------------------------------------

config = await loadConfig();
const emulated = config.firestoreEmulator && !config.authEmulator;
for (const node of document.querySelectorAll(emulated ? ".firebase-only" : ".emulator-only")) {
  node.classList.add("hidden");
  for (const input of node.querySelectorAll("input")) input.required = false;
}
$("mode").textContent = emulated
  ? `Local: Firestore emulator ${config.firestoreEmulator}, project ${config.firebase.projectId}, API ${config.startSearchUrl}; sign-in is the emulator's mock user.`
  : `Project ${config.firebase.projectId}, API ${config.startSearchUrl}; sign-in with Firebase Authentication${config.authEmulator ? " (Auth emulator)" : ""}.`;
$("signin").addEventListener("submit", signIn);
$("search").addEventListener("submit", startSearch);
$("watch").addEventListener("submit", watchById);
$("cancel").addEventListener("click", cancel);
document.body.dataset.ready = "true";
