import { useEffect, useState } from "preact/hooks";
import { call, type DataOf } from "../api.js";
import { ConfirmButton, DataTable, ErrorNote, fieldError, TextField, useAction } from "../ui.js";

export function ApisPage() {
  const [apis, setApis] = useState<DataOf<"keygate.listApis"> | null>(null);
  const [name, setName] = useState("");
  const { error, run } = useAction();
  const creation = useAction();

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
          empty="No APIs yet: create one above, then issue its keys from its page."
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
                <ConfirmButton
                  label="Delete"
                  name={`Delete ${api.name}`}
                  title={`Delete the API ${api.name}?`}
                  consequence={<p>Every key of {api.name} stops verifying at once, on every instance. This cannot be undone.</p>}
                  confirm={`Confirm deleting ${api.name}`}
                  onConfirm={() => remove(api.id)}
                />
              </td>
            </tr>
          )}
        />
      )}
    </>
  );
}
