import { useEffect, useState } from "preact/hooks";
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
  const nav = [
    ["#/apis", "APIs", section === undefined || section === "apis"],
    ["#/identities", "Identities", section === "identities"],
    ["#/access", "Permissions and roles", section === "access"],
    ["#/ratelimits", "Rate limits", section === "ratelimits"],
    ["#/root-keys", "Root keys", section === "root-keys"],
    ["#/analytics", "Analytics", section === "analytics"],
    ["#/gateway", "Gateway", section === "gateway"],
    ["#/webhooks", "Webhooks", section === "webhooks"],
    ["#/audit-log", "Audit log", section === "audit-log"],
    ["#/portals", "Portals", section === "portals"],
  ] as const;
  return (
    <>
      <header>
        <strong>keygate</strong>
        <nav aria-label="Main">
          {nav.map(([href, label, current]) => (
            <a key={href} href={href} aria-current={current ? "page" : undefined}>
              {label}
            </a>
          ))}
        </nav>
        <span class="who">
          {session.workspaceId} · {session.rootKeyId}
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
      </header>
      <main>
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
      </main>
    </>
  );
}
