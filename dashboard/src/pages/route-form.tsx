import { useState } from "preact/hooks";
import { type BodyOf, call } from "../api.js";
import { FormError, fieldError, numberOr, TextField, useAction } from "../ui.js";
import { Checkbox, GroupError } from "./gateway-controls.js";
import { METHODS, type Method, type RouteView } from "./policy-drafts.js";

/** The headers keygate can add to a forwarded request: what each carries, and a name it could have. */
const FORWARDED = [
  ["principal", "the principal (the verified key as JSON)", "x-keygate-principal"],
  ["keyId", "the key id", "x-keygate-key-id"],
  ["identity", "the identity id", "x-keygate-identity"],
  ["externalId", "the external id", "x-keygate-external-id"],
] as const;
type Forward = Record<(typeof FORWARDED)[number][0], string>;

/** A route's own fields as the form edits them (its policies are edited apart). */
interface RouteDraft {
  name: string;
  prefix: string;
  methods: Method[];
  upstream: string;
  timeoutMs: string;
  forward: Forward;
}

function draftOf(route: RouteView | undefined): RouteDraft {
  return {
    name: route?.name ?? "",
    prefix: route?.match.prefix ?? "/",
    methods: [...(route?.match.methods ?? [])],
    upstream: upstreamText(route?.upstream),
    timeoutMs: route?.timeoutMs === undefined ? "" : String(route.timeoutMs),
    forward: {
      principal: route?.forward?.principal ?? "",
      keyId: route?.forward?.keyId ?? "",
      identity: route?.forward?.identity ?? "",
      externalId: route?.forward?.externalId ?? "",
    },
  };
}

type Fields = Omit<BodyOf<"keygate.createRoute">, "policies" | "timeoutMs" | "forward">;

function fieldsOf(draft: RouteDraft): Fields & { forward: NonNullable<BodyOf<"keygate.createRoute">["forward"]> | null } {
  const forward = Object.fromEntries(Object.entries(draft.forward).filter(([, header]) => header.trim() !== ""));
  return {
    name: draft.name,
    match: { prefix: draft.prefix, ...(draft.methods.length > 0 ? { methods: draft.methods } : {}) },
    upstream: upstreamOf(draft.upstream),
    forward: Object.keys(forward).length > 0 ? forward : null,
  };
}

/** The upstream as the form shows it: its URL, or a pool (docs/gateway.md#upstream-pools) as JSON. */
function upstreamText(upstream: RouteView["upstream"] | undefined): string {
  if (upstream === undefined) return "";
  return typeof upstream === "string" ? upstream : JSON.stringify(upstream, null, 1);
}

/** The upstream a text says: a pool when it is a JSON object; anything else is sent as written, for the API to judge. */
function upstreamOf(text: string): Fields["upstream"] {
  if (!text.trim().startsWith("{")) return text;
  try {
    return JSON.parse(text) as Fields["upstream"];
  } catch {
    return text;
  }
}

/**
 * Creates a route (without `route`) or edits one: name, prefix and methods, upstream, timeout, the headers keygate
 * adds for the upstream. An emptied timeout or set of headers is removed.
 */
export function RouteForm(props: { route?: RouteView; onSaved: (route: RouteView) => void; onCancel?: () => void }) {
  const { route } = props;
  const [draft, setDraft] = useState<RouteDraft>(() => draftOf(route));
  const { error, run } = useAction();
  const set = (change: Partial<RouteDraft>) => setDraft({ ...draft, ...change });

  const submit = (event: Event) => {
    event.preventDefault();
    run(async () => {
      const { forward, ...fields } = fieldsOf(draft);
      const timeoutMs = draft.timeoutMs.trim() === "" ? null : numberOr(draft.timeoutMs);
      let saved: RouteView;
      if (route === undefined) {
        saved = await call("keygate.createRoute", {
          ...fields,
          ...(forward ? { forward } : {}),
          ...(timeoutMs !== null ? { timeoutMs } : {}),
        });
        setDraft(draftOf(undefined));
      } else {
        // The upstream is shown with its password masked: sent back only when changed, so that it keeps it.
        const { upstream, ...rest } = fields;
        saved = await call("keygate.updateRoute", {
          route: route.id,
          ...rest,
          ...(draft.upstream !== upstreamText(route.upstream) ? { upstream } : {}),
          forward,
          timeoutMs,
        });
      }
      props.onSaved(saved);
    });
  };
  const verb = route === undefined ? "Create route" : "Save route";
  return (
    <form onSubmit={submit} aria-label={route === undefined ? "Create a route" : "Edit the route"}>
      <div class="row">
        <TextField
          label="Route name"
          required
          value={draft.name}
          onValue={(name) => set({ name })}
          error={fieldError(error, "body.name")}
        />
        <TextField
          label="Path prefix"
          required
          value={draft.prefix}
          onValue={(prefix) => set({ prefix })}
          error={fieldError(error, "body.match.prefix")}
        />
        <TextField
          label="Upstream URL"
          hint="or a pool as JSON: { targets: [{ url, weight }], balance, health, retry, tls }"
          required
          value={draft.upstream}
          onValue={(upstream) => set({ upstream })}
          error={fieldError(error, "body.upstream")}
        />
        <TextField
          label="Timeout (ms)"
          type="number"
          hint="empty: the gateway's"
          value={draft.timeoutMs}
          onValue={(timeoutMs) => set({ timeoutMs })}
          error={fieldError(error, "body.timeoutMs")}
        />
      </div>
      <fieldset class="row">
        <legend>Methods (none: any)</legend>
        {METHODS.map((method) => (
          <Checkbox
            key={method}
            label={method}
            checked={draft.methods.includes(method)}
            onChecked={(checked) =>
              set({ methods: checked ? [...draft.methods, method] : draft.methods.filter((other) => other !== method) })
            }
          />
        ))}
        <GroupError error={error} location="body.match.methods" />
      </fieldset>
      <fieldset class="row">
        <legend>Headers keygate adds for the upstream: their names</legend>
        {FORWARDED.map(([name, carries, example]) => (
          <TextField
            key={name}
            label={`Header name for ${carries}`}
            hint="Empty: not sent"
            placeholder={example}
            value={draft.forward[name]}
            onValue={(header) => set({ forward: { ...draft.forward, [name]: header } })}
            error={fieldError(error, `body.forward.${name}`)}
          />
        ))}
        <GroupError error={error} location="body.forward" />
      </fieldset>
      <div class="actions">
        <button type="submit">{verb}</button>
        {props.onCancel && (
          <button type="button" onClick={props.onCancel}>
            Close
          </button>
        )}
      </div>
      <FormError error={error} instead="Not saved: see the messages beside the fields." />
    </form>
  );
}
