import { useEffect, useState } from "preact/hooks";
import { call, type DataOf } from "../api.js";
import { DataTable, ErrorNote, fieldError, TextField, useAction } from "../ui.js";

export function ApisPage() {
  const [apis, setApis] = useState<DataOf<"keygate.listApis"> | null>(null);
  const [name, setName] = useState("");
  const { error, run } = useAction();
  const creation = useAction();
  const [confirming, setConfirming] = useState<string | null>(null);

  const load = async () => setApis(await call("keygate.listApis", {}));
  useEffect(() => {
    run(load);
  }, []);

  const create = (event: Event) => {
    event.preventDefault();
    creation.run(async () => {
      await call("apis.createApi", { name });
      setName("");
      await load();
    });
  };
  const remove = (apiId: string) =>
    run(async () => {
      await call("apis.deleteApi", { apiId });
      setConfirming(null);
      await load();
    });

  return (
    <>
      <h1>APIs</h1>
      <ErrorNote error={error} />
      <form onSubmit={create} aria-label="Create an API">
        <h2>Create an API</h2>
        <TextField label="API name" required value={name} onValue={setName} error={fieldError(creation.error, "body.name")} />
        <button type="submit">Create API</button>
        {!fieldError(creation.error, "body.name") && <ErrorNote error={creation.error} />}
      </form>
      {apis && (
        <DataTable
          label="APIs"
          columns={["Name", "API id", "Actions"]}
          empty="No APIs yet."
          items={apis}
          row={(api) => (
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
          )}
        />
      )}
    </>
  );
}
