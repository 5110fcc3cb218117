import { fieldError, TextField } from "../ui.js";
import { Checkbox, changed, GroupError, SelectField } from "./gateway-controls.js";
import { type MatchDraft, METHODS, newMatch } from "./policy-drafts.js";

const ON = [
  ["path", "the path"],
  ["method", "the method"],
  ["header", "a header"],
  ["queryParam", "a query parameter"],
] as const;

const TESTS = [
  ["present", "is present"],
  ["exact", "is exactly"],
  ["prefix", "starts with"],
  ["regex", "matches the regular expression (RE2)"],
] as const;

/**
 * A policy's match expressions (all must hold; none: the policy applies to every request). `at` is their field in
 * the request body (`body.policies[2].match`), for the API's messages.
 */
export function MatchEditor(props: {
  matches: readonly MatchDraft[];
  onChange: (matches: MatchDraft[]) => void;
  error: unknown;
  at: string;
}) {
  const { matches, onChange, error, at } = props;
  return (
    <fieldset>
      <legend>Applies when</legend>
      {matches.length === 0 && <p class="hint">Every request of the route (no condition).</p>}
      {matches.map((match, index) => (
        <MatchControls
          key={index}
          index={index}
          match={match}
          onChange={(change) => onChange(changed(matches, index, change))}
          onRemove={() => onChange(matches.filter((_, other) => other !== index))}
          error={error}
          at={`${at}[${index}]`}
        />
      ))}
      <GroupError error={error} location={at} />
      <button type="button" onClick={() => onChange([...matches, newMatch()])}>
        Add a condition
      </button>
    </fieldset>
  );
}

function MatchControls(props: {
  index: number;
  match: MatchDraft;
  onChange: (change: Partial<MatchDraft>) => void;
  onRemove: () => void;
  error: unknown;
  at: string;
}) {
  const { match, onChange, error, at } = props;
  const field = match.on === "header" || match.on === "queryParam" ? `${at}.${match.on}` : `${at}.path.path`;
  const tests = match.on === "path" ? TESTS.slice(1) : TESTS;
  const testsText = match.on !== "method" && match.test !== "present";
  return (
    <fieldset class="row">
      <legend>Condition {props.index + 1}</legend>
      <SelectField
        label="Condition on"
        value={match.on}
        options={ON}
        onValue={(on) => onChange(on === "path" && match.test === "present" ? { on, test: "prefix" } : { on })}
      />
      {match.on === "method" ? (
        <fieldset>
          <legend>Methods</legend>
          {METHODS.map((method) => (
            <Checkbox
              key={method}
              label={method}
              checked={match.methods.includes(method)}
              onChecked={(checked) =>
                onChange({ methods: checked ? [...match.methods, method] : match.methods.filter((other) => other !== method) })
              }
            />
          ))}
          <GroupError error={error} location={`${at}.method.methods`} />
        </fieldset>
      ) : (
        <>
          {match.on !== "path" && (
            <TextField
              label={match.on === "header" ? "Header name" : "Parameter name"}
              value={match.name}
              onValue={(name) => onChange({ name })}
              error={fieldError(error, `${field}.name`)}
            />
          )}
          <SelectField label="Test" value={match.test} options={tests} onValue={(test) => onChange({ test })} />
          {testsText && (
            <TextField
              label={match.on === "path" ? "Path" : "Value"}
              value={match.text}
              onValue={(text) => onChange({ text })}
              error={fieldError(error, match.on === "path" ? field : `${field}.value`)}
            />
          )}
          {testsText && <Checkbox label="Ignore case" checked={match.ignoreCase} onChecked={(ignoreCase) => onChange({ ignoreCase })} />}
        </>
      )}
      <GroupError error={error} location={at} />
      {match.on !== "path" && match.on !== "method" && <GroupError error={error} location={field} />}
      <button type="button" aria-label={`Remove condition ${props.index + 1}`} onClick={props.onRemove}>
        Remove
      </button>
    </fieldset>
  );
}
