import { fieldError, TextField } from "../ui.js";
import type { CorsDraft } from "./cors-draft.js";
import { Checkbox } from "./gateway-controls.js";
import { METHODS } from "./policy-drafts.js";

/** cors: which origins may call the route from a browser, and what the preflight allows. */
export function CorsForm(props: { rule: CorsDraft; onChange: (rule: CorsDraft) => void; error: unknown; at: string }) {
  const { rule, onChange, error, at } = props;
  const set = (change: Partial<CorsDraft>) => onChange({ ...rule, ...change });
  return (
    <>
      <p class="hint">
        keygate answers preflights itself (no key, no upstream) and adds the CORS headers to every answer, its own refusals included.
      </p>
      <Checkbox label="Any origin (*)" checked={rule.anyOrigin} onChecked={(anyOrigin) => set({ anyOrigin })} />
      {!rule.anyOrigin && (
        <TextField
          label="Allowed origins"
          hint="One per line, e.g. https://app.example.com; ~ before a regex matching whole origins."
          rows={3}
          value={rule.origins}
          onValue={(text) => set({ origins: text })}
          error={fieldError(error, `${at}.allowOrigins`)}
        />
      )}
      <fieldset class="row">
        <legend>Allowed methods (none: the route's)</legend>
        {METHODS.map((method) => (
          <Checkbox
            key={method}
            label={method}
            checked={rule.methods.includes(method)}
            onChecked={(on) => set({ methods: on ? [...rule.methods, method] : rule.methods.filter((other) => other !== method) })}
          />
        ))}
      </fieldset>
      <div class="row">
        <TextField
          label="Allowed request headers"
          hint="comma-separated; empty: those the preflight asks for"
          value={rule.allowHeaders}
          onValue={(allowHeaders) => set({ allowHeaders })}
          error={fieldError(error, `${at}.allowHeaders`)}
        />
        <TextField
          label="Exposed answer headers"
          hint="besides keygate's own"
          value={rule.exposeHeaders}
          onValue={(exposeHeaders) => set({ exposeHeaders })}
          error={fieldError(error, `${at}.exposeHeaders`)}
        />
        <TextField
          label="Max age (s)"
          type="number"
          value={rule.maxAgeSeconds}
          onValue={(maxAgeSeconds) => set({ maxAgeSeconds })}
          error={fieldError(error, `${at}.maxAgeSeconds`)}
        />
      </div>
      <Checkbox label="Allow credentials" checked={rule.allowCredentials} onChecked={(allowCredentials) => set({ allowCredentials })} />
    </>
  );
}
