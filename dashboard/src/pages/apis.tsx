import { useEffect, useState } from "preact/hooks";
import { call } from "../api.js";
import { ErrorNote, Field, fieldError } from "../ui.js";

interface Api {
  id: string;
  name: string;
}

export function ApisPage() {
  const [apis, setApis] = useState<Api[] | null>(null);
  const [name, setName] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [createError, setCreateError] = useState<unknown>(null);
  const [confirming, setConfirming] = useState<string | null>(null);

  const load = () => call<Api[]>("keygate.listApis", {}).then(setApis, setError);
  useEffect(() => {
    load();
  }, []);

  const create = async (event: Event) => {
    event.preventDefault();
    setCreateError(null);
    try {
      await call("apis.createApi", { name });
      setName("");
      await load();
    } catch (failure) {
      setCreateError(failure);
    }
  };
  const remove = async (apiId: string) => {
    setError(null);
    try {
      await call("apis.deleteApi", { apiId });
      setConfirming(null);
      await load();
    } catch (failure) {
      setError(failure);
    }
  };

  return (
    <>
      <h1>APIs</h1>
      <ErrorNote error={error} />
      <form onSubmit={create} aria-label="Create an API">
        <h2>Create an API</h2>
        <Field label="API name" error={fieldError(createError, "body.name")}>
          {(id, describedBy) => (
            <input id={id} required value={name} aria-describedby={describedBy} onInput={(event) => setName(event.currentTarget.value)} />
          )}
        </Field>
        <button type="submit">Create API</button>
        {!fieldError(createError, "body.name") && <ErrorNote error={createError} />}
      </form>
      {apis && (
        <table aria-label="APIs">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">API id</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {apis.length === 0 && (
              <tr>
                <td colSpan={3}>No APIs yet.</td>
              </tr>
            )}
            {apis.map((api) => (
              <tr key={api.id}>
                <td>
                  <a href={`#/apis/${encodeURIComponent(api.id)}`}>{api.name}</a>
                </td>
                <td>
                  <code>{api.id}</code>
                </td>
                <td>
                  {confirming === api.id ? (
                    <>
                      <button type="button" class="danger" onClick={() => remove(api.id)}>
                        Confirm deleting {api.name}
                      </button>{" "}
                      <button type="button" onClick={() => setConfirming(null)}>
                        Cancel
                      </button>
                    </>
                  ) : (
                    <button type="button" aria-label={`Delete ${api.name}`} onClick={() => setConfirming(api.id)}>
                      Delete
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
