import { useEffect, useState } from "preact/hooks";
import { call, type DataOf } from "../api.js";
import {
  ConfirmButton,
  DataTable,
  ErrorNote,
  fieldError,
  formatTime,
  fromDateTimeInput,
  ShownOnce,
  splitList,
  TextField,
  useAction,
} from "../ui.js";

/** The workspace's stored root keys: create (never with more than the session's root key holds), list, revoke. */
export function RootKeysPage() {
  const [rootKeys, setRootKeys] = useState<DataOf<"keygate.listRootKeys"> | null>(null);
  const [name, setName] = useState("");
  const [permissions, setPermissions] = useState("");
  const [expires, setExpires] = useState("");
  const { error, run } = useAction();
  const creation = useAction();
  const [shown, setShown] = useState<string | null>(null);

  const load = async () => setRootKeys(await call("keygate.listRootKeys", {}));
  useEffect(() => {
    run(load);
  }, []);

  const create = (event: Event) => {
    event.preventDefault();
    creation.run(async () => {
      const at = fromDateTimeInput(expires);
      const created = await call("keygate.createRootKey", {
        permissions: splitList(permissions),
        ...(name ? { name } : {}),
        ...(at !== undefined ? { expires: at } : {}),
      });
      setShown(created.key);
      setName("");
      setPermissions("");
      setExpires("");
      await load();
    });
  };
  const revoke = (rootKeyId: string) =>
    run(async () => {
      await call("keygate.deleteRootKey", { rootKeyId });
      await load();
    });

  const permissionsError = fieldError(creation.error, "body.permissions");
  return (
    <>
      <h1>Root keys</h1>
      <ErrorNote error={error} />
      {shown && <ShownOnce label="New root key" value={shown} onDismiss={() => setShown(null)} />}
      <form onSubmit={create} aria-label="Create a root key">
        <h2>Create a root key</h2>
        <TextField label="Root key name" value={name} onValue={setName} error={fieldError(creation.error, "body.name")} />
        <TextField
          label="Root key permissions"
          hint="One per line, e.g. api.*.read_key. A root key can only grant permissions it holds itself."
          rows={3}
          value={permissions}
          onValue={setPermissions}
          error={permissionsError}
        />
        <TextField
          label="Root key expires (UTC)"
          type="datetime-local"
          value={expires}
          onValue={setExpires}
          error={fieldError(creation.error, "body.expires")}
        />
        <button type="submit">Create root key</button>
        {!permissionsError && <ErrorNote error={creation.error} />}
      </form>
      {rootKeys && (
        <DataTable
          label="Root keys"
          columns={["Id", "Name", "Permissions", "Created", "State", "Actions"]}
          empty="No stored root keys (root keys from the configuration are not listed)."
          items={rootKeys}
          row={(rootKey) => (
            <tr key={rootKey.rootKeyId}>
              <td>
                <code>{rootKey.rootKeyId}</code>
              </td>
              <td>{rootKey.name ?? ""}</td>
              <td>{rootKey.permissions.join(", ")}</td>
              <td>{formatTime(rootKey.createdAt)}</td>
              <td>
                {rootKey.revokedAt !== undefined
                  ? `revoked ${formatTime(rootKey.revokedAt)}`
                  : rootKey.expires !== undefined && rootKey.expires <= Date.now()
                    ? "expired"
                    : "active"}
              </td>
              <td>
                {rootKey.revokedAt === undefined && (
                  <ConfirmButton
                    label="Revoke"
                    name={`Revoke ${rootKey.name ?? rootKey.rootKeyId}`}
                    title={`Revoke the root key ${rootKey.name ?? rootKey.rootKeyId}?`}
                    consequence={
                      <p>Every call made with it is refused (401) at once, and its dashboard sessions end. This cannot be undone.</p>
                    }
                    confirm={`Confirm revoking ${rootKey.name ?? rootKey.rootKeyId}`}
                    onConfirm={() => revoke(rootKey.rootKeyId)}
                  />
                )}
              </td>
            </tr>
          )}
        />
      )}
    </>
  );
}
