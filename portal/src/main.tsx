import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { ConfirmButton } from "../../ui/confirm.js";
import { DEFAULT_GRACE_MS, GracePeriodField, KeyState } from "../../ui/key-state.js";
import { Pager, useCursorPages } from "../../ui/pager.js";
import { Shell, TableScroll } from "../../ui/shell.js";
import { ShownOnce } from "../../ui/shown-once.js";
import { call, callPage, current, type PortalKey, type PortalSession, redeem, signOut } from "./api.js";
import { Usage } from "./usage.js";
import "../../ui/base.css";
import "./style.css";

/** A key made or rerolled: its plaintext, shown once. */
type Issued = { keyId: string; key: string };
type State = { kind: "loading" } | { kind: "failed"; message: string } | { kind: "ready"; session: PortalSession };

/** Keys listed per page: a customer with hundreds of keys pages through them. */
const PAGE_SIZE = 50;
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

function useHash(): string {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const update = () => setHash(location.hash);
    addEventListener("hashchange", update);
    return () => removeEventListener("hashchange", update);
  }, []);
  return hash;
}

function Portal({ session }: { session: PortalSession }) {
  const { portal, scopes } = session;
  const [ended, setEnded] = useState(false);
  const hash = useHash();
  useEffect(() => {
    if (portal.primaryColor) document.documentElement.style.setProperty("--accent", portal.primaryColor);
    document.title = `${portal.displayName}: API keys`;
  }, [portal.primaryColor, portal.displayName]);
  if (ended) return <main class="centered">You have left the portal.</main>;
  const keys = scopes.some((scope) => scope.startsWith("keys:"));
  const usage = scopes.includes("analytics:read");
  const nav = [
    ...(keys ? [{ href: "#keys", label: "API keys", current: hash !== "#usage" }] : []),
    ...(usage ? [{ href: "#usage", label: "Usage", current: hash === "#usage" || !keys }] : []),
  ];
  const brand = (
    <>
      {portal.logoUrl && <img src={portal.logoUrl} alt="" />}
      <span>{portal.displayName}</span>
    </>
  );
  const account = (
    <>
      <span class="who">
        Signed in as <code>{session.externalId}</code>
      </span>
      {session.returnUrl && (
        <a href={session.returnUrl} data-testid="return-link">
          Back to the application
        </a>
      )}
      <button type="button" onClick={() => signOut(session.csrfToken).finally(() => setEnded(true))}>
        Leave
      </button>
    </>
  );
  return (
    <Shell brand={brand} nav={nav} account={account}>
      <h1>{portal.displayName}</h1>
      {keys && <Keys session={session} />}
      {usage && <Usage session={session} />}
    </Shell>
  );
}

function Keys({ session }: { session: PortalSession }) {
  const [keys, setKeys] = useState<PortalKey[]>([]);
  const [shown, setShown] = useState<Issued | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const [name, setName] = useState("");
  const [apiId, setApiId] = useState(session.apiIds.length === 1 ? (session.apiIds[0] ?? "") : "");
  const [grace, setGrace] = useState(DEFAULT_GRACE_MS);
  const pages = useCursorPages();
  const can = (scope: string) => session.scopes.includes(scope);
  const load = (cursor: string | undefined) => {
    if (!can("keys:read")) return;
    callPage<PortalKey>(session, "listKeys", { limit: PAGE_SIZE, ...(cursor ? { cursor } : {}) })
      .then((page) => {
        setKeys(page.items);
        pages.setNext(page.cursor);
      })
      .catch((error: Error) => setProblem(error.message));
  };
  useEffect(() => load(undefined), []);
  const issue = (promise: Promise<Issued>) =>
    promise
      .then((issued) => {
        setShown(issued);
        setProblem(null);
        load(pages.current);
      })
      .catch((error: Error) => setProblem(error.message));
  const create = (event: Event) => {
    event.preventDefault();
    issue(
      call<Issued>(session, "createKey", { name: name.trim(), ...(apiId ? { apiId } : {}) }).then((issued) => {
        setName("");
        return issued;
      }),
    );
  };
  return (
    <section id="keys" aria-labelledby="keys-heading">
      <h2 id="keys-heading">Your API keys</h2>
      {problem && (
        <p class="error" role="alert">
          {problem}
        </p>
      )}
      {shown && <ShownOnce label="New key" value={shown.key} onDismiss={() => setShown(null)} testId="new-key" />}
      {can("keys:create") && (
        <form class="row" aria-label="Create a key" onSubmit={create}>
          <div class="field">
            <label for="new-key-name">Name of the new key</label>
            <input
              id="new-key-name"
              required
              maxLength={200}
              value={name}
              aria-describedby="new-key-name-hint"
              onInput={(event) => setName(event.currentTarget.value)}
            />
            <small id="new-key-name-hint" class="hint">
              Where you will use it, e.g. "production server"
            </small>
          </div>
          {session.apiIds.length > 1 && (
            <div class="field">
              <label for="new-key-api">API</label>
              <select id="new-key-api" required value={apiId} onChange={(event) => setApiId(event.currentTarget.value)}>
                <option value="" disabled>
                  Choose an API…
                </option>
                {session.apiIds.map((id) => (
                  <option key={id} value={id}>
                    {id}
                  </option>
                ))}
              </select>
            </div>
          )}
          <button type="submit" data-testid="create-key">
            Create key
          </button>
        </form>
      )}
      {can("keys:read") && (
        <TableScroll label="Your API keys">
          <table data-testid="keys" aria-label="Your API keys">
            <thead>
              <tr>
                <th scope="col">Key</th>
                <th scope="col">Name</th>
                <th scope="col">State</th>
                <th scope="col">Created</th>
                <th scope="col">Last used</th>
                <th scope="col">This month</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {keys.length === 0 && (
                <tr>
                  <td class="empty" colSpan={7}>
                    {can("keys:create") ? "No keys yet: name one above and create it." : "No keys yet."}
                  </td>
                </tr>
              )}
              {keys.map((key) => (
                <tr key={key.keyId} data-key-id={key.keyId}>
                  <td>
                    <code class="nowrap">{key.start}…</code>
                  </td>
                  <td>{key.name ?? ""}</td>
                  <td data-testid="key-state">
                    <KeyState expires={key.expires} enabled={key.enabled} formatTime={(ms) => new Date(ms).toLocaleString()} />
                  </td>
                  <td>{new Date(key.createdAt).toLocaleString()}</td>
                  <td>{key.lastUsed === undefined ? "never" : new Date(key.lastUsed).toLocaleString()}</td>
                  <td data-testid="verifications">{key.verifications ?? 0}</td>
                  <td>
                    {can("keys:reroll") && (key.expires === undefined || key.expires > Date.now()) && (
                      <ConfirmButton
                        label="Reroll"
                        name={`Reroll ${key.name ?? key.start}`}
                        title={`Reroll the key ${key.name ?? ""} (${key.start}…)?`}
                        consequence={
                          <p>
                            You get a new key in its place, shown once. This key keeps working for the time you choose here, then stops: put
                            the new key in your application before then.
                          </p>
                        }
                        confirm="Reroll the key"
                        onConfirm={() => issue(call<Issued>(session, "rerollKey", { keyId: key.keyId, expiration: grace }))}
                      >
                        <GracePeriodField label="This key keeps working for" value={grace} onValue={setGrace} />
                      </ConfirmButton>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
      )}
      <Pager label="Pages of keys" pages={pages} load={load} />
    </section>
  );
}

render(<App />, document.getElementById("app") as HTMLElement);
