import { useEffect, useState } from "preact/hooks";
import { KeygateBrand, type NavItem, Shell } from "../../ui/shell.js";
import { currentSession, type Session, signOut, whenSessionLost } from "./api.js";
import { AccessPage } from "./pages/access.js";
import { AnalyticsPage } from "./pages/analytics.js";
import { ApisPage } from "./pages/apis.js";
import { AuditLogPage } from "./pages/audit-log.js";
import { GatewayPage } from "./pages/gateway.js";
import { IdentitiesPage } from "./pages/identities.js";
import { KeysPage } from "./pages/keys.js";
import { PortalsPage } from "./pages/portals.js";
import { RatelimitsPage } from "./pages/ratelimits.js";
import { RootKeysPage } from "./pages/root-keys.js";
import { SignInPage } from "./pages/sign-in.js";
import { WebhooksPage } from "./pages/webhooks.js";
import { ErrorNote } from "./ui.js";

/** The page the location's hash names: `#/apis/<id>`, `#/root-keys`, `#/analytics`, else the APIs. */
function useHashRoute(): string[] {
  const parse = () => location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const [route, setRoute] = useState(parse);
  useEffect(() => {
    const update = () => setRoute(parse());
    addEventListener("hashchange", update);
    return () => removeEventListener("hashchange", update);
  }, []);
  return route;
}

export function App() {
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const route = useHashRoute();

  useEffect(() => {
    whenSessionLost(() => setSession(null));
    currentSession().then(setSession, (failure) => {
      setError(failure);
      setSession(null);
    });
  }, []);

  if (session === undefined) return <p aria-busy="true">Loading…</p>;
  if (session === null) return <SignInPage onSignedIn={setSession} />;

  const [section, id, resourceId] = route;
  const nav: NavItem[] = (
    [
      ["apis", "APIs"],
      ["identities", "Identities"],
      ["access", "Permissions and roles"],
      ["ratelimits", "Rate limits"],
      ["root-keys", "Root keys"],
      ["analytics", "Analytics"],
      ["gateway", "Gateway"],
      ["webhooks", "Webhooks"],
      ["audit-log", "Audit log"],
      ["portals", "Portals"],
    ] as const
  ).map(([name, label]) => ({ href: `#/${name}`, label, current: (section ?? "apis") === name }));
  const account = (
    <>
      <span class="who">
        Workspace <code>{session.workspaceId}</code>
        <br />
        Root key <code>{session.rootKeyId}</code>
      </span>
      <button
        type="button"
        onClick={() =>
          signOut().then(
            () => setSession(null),
            (failure) => setError(failure),
          )
        }
      >
        Sign out
      </button>
    </>
  );
  return (
    <Shell brand={<KeygateBrand />} nav={nav} account={account}>
      <ErrorNote error={error} />
      {section === "root-keys" ? (
        <RootKeysPage />
      ) : section === "identities" ? (
        <IdentitiesPage />
      ) : section === "access" ? (
        <AccessPage />
      ) : section === "ratelimits" ? (
        <RatelimitsPage />
      ) : section === "analytics" ? (
        <AnalyticsPage />
      ) : section === "gateway" ? (
        <GatewayPage />
      ) : section === "webhooks" ? (
        <WebhooksPage />
      ) : section === "audit-log" ? (
        <AuditLogPage {...(id && resourceId ? { resourceType: id, resourceId } : {})} />
      ) : section === "portals" ? (
        <PortalsPage />
      ) : section === "apis" && id !== undefined ? (
        <KeysPage apiId={id} />
      ) : (
        <ApisPage />
      )}
    </Shell>
  );
}
