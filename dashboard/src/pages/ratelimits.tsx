import { useState } from "preact/hooks";
import { call } from "../api.js";
import { ErrorNote, Field, FormError, fieldError } from "../ui.js";

interface Override {
  overrideId: string;
  identifier: string;
  limit: number;
  duration: number;
}

/**
 * The overrides of a rate limit namespace, by its name: list, set (create or change), delete. Namespaces come into
 * being with their first use or override; the API has no list of them.
 */
export function RatelimitsPage() {
  const [namespace, setNamespace] = useState("");
  const [shown, setShown] = useState<string | null>(null);
  const [overrides, setOverrides] = useState<Override[]>([]);
  const [identifier, setIdentifier] = useState("");
  const [limit, setLimit] = useState("");
  const [duration, setDuration] = useState("60000");
  const [error, setError] = useState<unknown>(null);
  const [overrideError, setOverrideError] = useState<unknown>(null);

  const load = async (name: string) => {
    setError(null);
    try {
      const { overrides: listed } = await call<{ overrides: Override[] }>("ratelimit.listOverrides", { namespace: name, limit: 100 });
      setOverrides(listed);
      setShown(name);
    } catch (failure) {
      setError(failure);
      setShown(null);
    }
  };
  const submit = async (event: Event) => {
    event.preventDefault();
    if (shown === null) return;
    setOverrideError(null);
    try {
      await call("ratelimit.setOverride", { namespace: shown, identifier, limit: Number(limit), duration: Number(duration) });
      setIdentifier("");
      setLimit("");
      await load(shown);
    } catch (failure) {
      setOverrideError(failure);
    }
  };
  const remove = async (override: Override) => {
    if (shown === null) return;
    setError(null);
    try {
      await call("ratelimit.deleteOverride", { namespace: shown, identifier: override.identifier });
      await load(shown);
    } catch (failure) {
      setError(failure);
    }
  };

  return (
    <>
      <h1>Rate limit overrides</h1>
      <form
        class="row"
        aria-label="Choose a namespace"
        onSubmit={(event) => {
          event.preventDefault();
          load(namespace);
        }}
      >
        <Field label="Namespace" error={fieldError(error, "body.namespace")}>
          {(id, describedBy) => (
            <input
              id={id}
              required
              value={namespace}
              aria-describedby={describedBy}
              onInput={(event) => setNamespace(event.currentTarget.value)}
            />
          )}
        </Field>
        <button type="submit">Show overrides</button>
      </form>
      {!fieldError(error, "body.namespace") && <ErrorNote error={error} />}
      {shown !== null && (
        <>
          <table aria-label="Overrides">
            <thead>
              <tr>
                <th scope="col">Identifier</th>
                <th scope="col">Limit</th>
                <th scope="col">Per milliseconds</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {overrides.length === 0 && (
                <tr>
                  <td colSpan={4}>No overrides in {shown}.</td>
                </tr>
              )}
              {overrides.map((override) => (
                <tr key={override.overrideId}>
                  <td>
                    <code>{override.identifier}</code>
                  </td>
                  <td>{override.limit}</td>
                  <td>{override.duration}</td>
                  <td>
                    <button type="button" aria-label={`Delete override ${override.identifier}`} onClick={() => remove(override)}>
                      Delete
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          <form onSubmit={submit} aria-label="Set an override">
            <h2>Set an override in {shown}</h2>
            <div class="row">
              <Field label="Identifier" hint="Exact, or a pattern with *" error={fieldError(overrideError, "body.identifier")}>
                {(id, describedBy) => (
                  <input
                    id={id}
                    required
                    value={identifier}
                    aria-describedby={describedBy}
                    onInput={(event) => setIdentifier(event.currentTarget.value)}
                  />
                )}
              </Field>
              <Field label="Limit" hint="0 blocks" error={fieldError(overrideError, "body.limit")}>
                {(id, describedBy) => (
                  <input
                    id={id}
                    type="number"
                    required
                    value={limit}
                    aria-describedby={describedBy}
                    onInput={(event) => setLimit(event.currentTarget.value)}
                  />
                )}
              </Field>
              <Field label="Duration (ms)" error={fieldError(overrideError, "body.duration")}>
                {(id, describedBy) => (
                  <input
                    id={id}
                    type="number"
                    required
                    value={duration}
                    aria-describedby={describedBy}
                    onInput={(event) => setDuration(event.currentTarget.value)}
                  />
                )}
              </Field>
              <button type="submit">Set override</button>
            </div>
            <FormError error={overrideError} />
          </form>
        </>
      )}
    </>
  );
}
