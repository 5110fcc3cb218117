import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { call, current, type Point, type PortalKey, type PortalSession, redeem, signOut } from "./api.js";
import { UsageChart } from "./usage.js";
import "./style.css";

type State = { kind: "loading" } | { kind: "failed"; message: string } | { kind: "ready"; session: PortalSession };

/** Lands from the session URL (redeems the code, then takes it out of the address bar) or resumes the cookie's session. */
function App() {
  const [state, setState] = useState<State>({ kind: "loading" });
  useEffect(() => {
    const code = new URLSearchParams(location.search).get("code");
    const opened = code ? redeem(code) : current();
    if (code) history.replaceState(null, "", location.pathname);
    opened
      .then((session) => setState({ kind: "ready", session }))
      .catch((error: Error) =>
        setState({
          kind: "failed",
          message: code ? `This link cannot be used: ${error.message}` : `No portal session here: ${error.message}`,
        }),
      );
  }, []);
  if (state.kind === "loading") return <main class="centered">Opening your portal…</main>;
  if (state.kind === "failed")
    return (
      <main class="centered" data-testid="portal-error">
        <h1>This page is not available</h1>
        <p>{state.message}</p>
        <p>Go back to the application you came from and open the portal again.</p>
      </main>
    );
  return <Portal session={state.session} />;
}

function Portal({ session }: { session: PortalSession }) {
  const { portal, scopes } = session;
  const [ended, setEnded] = useState(false);
  const style = portal.primaryColor ? { "--accent": portal.primaryColor } : {};
  if (ended) return <main class="centered">You have left the portal.</main>;
  return (
    <div style={style}>
      <header>
        {portal.logoUrl && <img class="logo" src={portal.logoUrl} alt="" />}
        <h1>{portal.displayName}</h1>
        <span class="who">{session.externalId}</span>
        {session.returnUrl && (
          <a class="back" href={session.returnUrl} data-testid="return-link">
            Back to the application
          </a>
        )}
        <button type="button" onClick={() => signOut(session.csrfToken).finally(() => setEnded(true))}>
          Leave
        </button>
      </header>
      <main>
        {scopes.some((scope) => scope.startsWith("keys:")) && <Keys session={session} />}
        {scopes.includes("analytics:read") && <Usage session={session} />}
      </main>
    </div>
  );
}

function Keys({ session }: { session: PortalSession }) {
  const [keys, setKeys] = useState<PortalKey[]>([]);
  const [shown, setShown] = useState<{ keyId: string; key: string } | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const [expiration, setExpiration] = useState(0);
  const can = (scope: string) => session.scopes.includes(scope);
  const reload = () => {
    if (can("keys:read"))
      call<PortalKey[]>(session, "listKeys", {})
        .then(setKeys)
        .catch((error: Error) => setProblem(error.message));
  };
  useEffect(reload, []);
  const issue = (promise: Promise<{ keyId: string; key: string }>) =>
    promise
      .then((issued) => {
        setShown(issued);
        setProblem(null);
        reload();
      })
      .catch((error: Error) => setProblem(error.message));
  return (
    <section>
      <h2>Your API keys</h2>
      {problem && <p class="problem">{problem}</p>}
      {shown && <NewKey issued={shown} onDone={() => setShown(null)} />}
      {can("keys:create") && (
        <button type="button" data-testid="create-key" onClick={() => issue(call(session, "createKey", { name: "Created in the portal" }))}>
          Create a key
        </button>
      )}
      {can("keys:reroll") && (
        <label class="expiration">
          When rerolling, the old key stops working{" "}
          <select value={expiration} onChange={(event) => setExpiration(Number((event.target as HTMLSelectElement).value))}>
            <option value={0}>at once</option>
            <option value={3_600_000}>in an hour</option>
            <option value={86_400_000}>in a day</option>
          </select>
        </label>
      )}
      {can("keys:read") && (
        <table data-testid="keys">
          <thead>
            <tr>
              <th>Key</th>
              <th>Name</th>
              <th>Created</th>
              <th>Last used</th>
              <th>This month</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {keys.map((key) => (
              <tr key={key.keyId} data-key-id={key.keyId}>
                <td>
                  <code>{key.start}…</code>
                  {key.expires !== undefined && <span class="note"> expires {new Date(key.expires).toLocaleString()}</span>}
                </td>
                <td>{key.name ?? ""}</td>
                <td>{new Date(key.createdAt).toLocaleDateString()}</td>
                <td>{key.lastUsed === undefined ? "never" : new Date(key.lastUsed).toLocaleString()}</td>
                <td data-testid="verifications">{key.verifications ?? 0}</td>
                <td>
                  {can("keys:reroll") && (
                    <button
                      type="button"
                      data-testid="reroll"
                      onClick={() => issue(call(session, "rerollKey", { keyId: key.keyId, expiration }))}
                    >
                      Reroll
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** A new key, shown this once, with a copy button. */
function NewKey({ issued, onDone }: { issued: { keyId: string; key: string }; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  return (
    <div class="new-key" data-testid="new-key">
      <p>Your new key. Copy it now: it will not be shown again.</p>
      <code data-testid="new-key-value">{issued.key}</code>
      <button type="button" onClick={() => navigator.clipboard?.writeText(issued.key).then(() => setCopied(true))}>
        {copied ? "Copied" : "Copy"}
      </button>
      <button type="button" onClick={onDone}>
        Done
      </button>
    </div>
  );
}

function Usage({ session }: { session: PortalSession }) {
  const [points, setPoints] = useState<Point[] | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const load = () => {
    const end = Date.now() + 60_000;
    call<Point[]>(session, "getVerifications", { startTime: end - 24 * 3_600_000, endTime: end })
      .then(setPoints)
      .catch((error: Error) => setProblem(error.message));
  };
  useEffect(load, []);
  return (
    <section>
      <h2>Usage, last 24 hours</h2>
      <button type="button" data-testid="refresh-usage" onClick={load}>
        Refresh
      </button>
      {problem && <p class="problem">{problem}</p>}
      {points && <UsageChart points={points} />}
    </section>
  );
}

render(<App />, document.getElementById("app") as HTMLElement);
