import { useState } from "preact/hooks";
import { ApiError, call } from "../api.js";
import { ErrorNote, FormError, fieldError, TextField, useAction } from "../ui.js";
import { CorsForm } from "./cors-form.js";
import { Checkbox, GroupError, ItemButtons, moved, SelectField } from "./gateway-controls.js";
import { MatchEditor } from "./match-editor.js";
import {
  draftsOf,
  newPolicy,
  POLICY_KINDS,
  type PolicyBody,
  type PolicyDraft,
  type PolicyKind,
  policiesBody,
  type RouteView,
} from "./policy-drafts.js";
import { type Api, FirewallForm, KeyauthForm, LoggingForm, RatelimitForm } from "./policy-forms.js";

const KINDS: readonly (readonly [PolicyKind, string])[] = [
  ["keyauth", "keyauth: an API key"],
  ["ratelimit", "ratelimit: requests per window"],
  ["firewall", "firewall: deny"],
  ["openapi", "openapi: validate requests"],
  ["logging", "logging: record more"],
  ["cors", "cors: browsers on other origins"],
];

/**
 * A route's policies, in order: each one's form, moved up and down, enabled, removed, added; saved all at once with
 * keygate.setRoutePolicies. A 400 names `body.policies[i]...`: each message stands beside the field of policy i.
 */
export function PolicyEditor(props: { route: RouteView; apis: readonly Api[]; onSaved: (route: RouteView) => void }) {
  const { route } = props;
  const [drafts, setDrafts] = useState<PolicyDraft[]>(() => draftsOf(route.policies));
  const [state, setState] = useState<"unchanged" | "changed" | "saved">("unchanged");
  const [kind, setKind] = useState<PolicyKind>(POLICY_KINDS[0]);
  const { error, setError, run } = useAction();

  const change = (next: PolicyDraft[], shifted = false) => {
    setDrafts(next);
    setState("changed");
    // The messages name policies by place: once the places change they would stand beside the wrong ones.
    if (shifted) setError(null);
  };
  const saved = (answer: RouteView) => {
    setDrafts(draftsOf(answer.policies));
    setState("saved");
    props.onSaved(answer);
  };
  const save = (event: Event) => {
    event.preventDefault();
    run(async () => saved(await call("keygate.setRoutePolicies", { route: route.id, policies: policiesBody(drafts) })));
  };

  return (
    <section aria-label={`Policies of ${route.name}`}>
      <h3>Policies</h3>
      <p class="hint">In order: firewalls and missing keys refuse first; the first keyauth that applies is the one used.</p>
      <form onSubmit={save} aria-label="Edit the policies">
        {drafts.length === 0 && <p>No policies: every request is forwarded.</p>}
        {drafts.map((draft, index) => (
          <PolicyControls
            key={draft.uid}
            draft={draft}
            index={index}
            count={drafts.length}
            apis={props.apis}
            error={error}
            onChange={(next) => change(drafts.map((each) => (each.uid === draft.uid ? next : each)))}
            move={(from, to) => change(moved(drafts, from, to), true)}
            remove={() =>
              change(
                drafts.filter((each) => each.uid !== draft.uid),
                true,
              )
            }
          />
        ))}
        <GroupError error={error} location="body.policies" />
        <div class="row">
          <SelectField label="Kind of policy" value={kind} options={KINDS} onValue={setKind} />
          <button
            type="button"
            onClick={() =>
              change(
                [
                  ...drafts,
                  newPolicy(
                    kind,
                    drafts.map((each) => each.name),
                  ),
                ],
                true,
              )
            }
          >
            Add policy
          </button>
        </div>
        <button type="submit">Save policies</button>{" "}
        <span role="status">{state === "changed" ? "Unsaved changes." : state === "saved" ? "Policies saved." : ""}</span>
        <FormError error={error} instead="The policies were not saved: see the messages beside the fields." />
      </form>
      <JsonEditor route={route} policies={() => policiesBody(drafts)} onSaved={saved} />
    </section>
  );
}

function PolicyControls(props: {
  draft: PolicyDraft;
  index: number;
  count: number;
  apis: readonly Api[];
  error: unknown;
  onChange: (draft: PolicyDraft) => void;
  move: (from: number, to: number) => void;
  remove: () => void;
}) {
  const { draft, index, error } = props;
  const at = `body.policies[${index}]`;
  const set = (change: Partial<PolicyDraft>) => props.onChange({ ...draft, ...change });
  const rule = draft.rule;
  const ruleAt = `${at}.${rule.kind}`;
  const label = draft.name || `policy ${index + 1}`;
  return (
    <fieldset>
      <legend>
        Policy {index + 1}: {draft.name} ({rule.kind}
        {draft.enabled ? "" : ", disabled"})
      </legend>
      <div class="row">
        <TextField label="Policy name" value={draft.name} onValue={(name) => set({ name })} error={fieldError(error, `${at}.name`)} />
        <Checkbox label="Enabled" checked={draft.enabled} onChecked={(enabled) => set({ enabled })} />
        <ItemButtons what={`policy ${label}`} index={index} count={props.count} move={props.move} remove={props.remove} />
      </div>
      {rule.kind === "keyauth" && (
        <KeyauthForm rule={rule} onChange={(next) => set({ rule: next })} error={error} at={ruleAt} apis={props.apis} />
      )}
      {rule.kind === "ratelimit" && <RatelimitForm rule={rule} onChange={(next) => set({ rule: next })} error={error} at={ruleAt} />}
      {rule.kind === "firewall" && <FirewallForm rule={rule} onChange={(next) => set({ rule: next })} error={error} at={ruleAt} />}
      {rule.kind === "logging" && <LoggingForm rule={rule} onChange={(next) => set({ rule: next })} error={error} at={ruleAt} />}
      {rule.kind === "cors" && <CorsForm rule={rule} onChange={(next) => set({ rule: next })} error={error} at={ruleAt} />}
      {rule.kind === "openapi" && <p class="hint">Validates requests against the route's OpenAPI document; no settings.</p>}
      <GroupError error={error} location={ruleAt} />
      <MatchEditor matches={draft.match} onChange={(match) => set({ match })} error={error} at={`${at}.match`} />
      <GroupError error={error} location={at} />
    </fieldset>
  );
}

/**
 * The policies as keygate.setRoutePolicies takes them, edited as text and saved as they are (the API checks them):
 * for what the forms leave out, or to paste policies written for Unkey's gateway.
 */
function JsonEditor(props: { route: RouteView; policies: () => PolicyBody[]; onSaved: (route: RouteView) => void }) {
  const [text, setText] = useState("");
  const { error, run } = useAction();
  const save = (event: Event) => {
    event.preventDefault();
    run(async () => {
      let policies: PolicyBody[];
      try {
        policies = JSON.parse(text);
      } catch {
        throw new ApiError(400, "invalid_input", "Not valid JSON.", [
          { location: "body.policies", message: "must be a JSON array of policies" },
        ]);
      }
      props.onSaved(await call("keygate.setRoutePolicies", { route: props.route.id, policies }));
    });
  };
  const messages = error instanceof ApiError ? error.errors : [];
  return (
    <details onToggle={(event) => (event.currentTarget as HTMLDetailsElement).open && setText(JSON.stringify(props.policies(), null, 2))}>
      <summary>Edit as JSON</summary>
      <form onSubmit={save} aria-label="Edit the policies as JSON">
        <TextField label="Policies (JSON)" rows={16} class="sql" value={text} onValue={setText} />
        {messages.length > 0 && (
          <ul class="field-error">
            {messages.map((each) => (
              <li key={each.location + each.message}>
                <code>{each.location}</code> {each.message}
              </li>
            ))}
          </ul>
        )}
        <button type="submit">Save JSON</button>
        {messages.length === 0 && <ErrorNote error={error} />}
      </form>
    </details>
  );
}
