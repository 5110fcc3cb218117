import { useEffect, useState } from "preact/hooks";
import { type BodyOf, call, callPage, type DataOf, type ProcedureName } from "../api.js";
import { ConfirmButton, DataTable, ErrorNote, FormError, fieldError, splitList, TextField, useAction } from "../ui.js";

/** Permissions and roles of the workspace: list, create, delete (the API has no update for either). */
export function AccessPage() {
  const [permissions, setPermissions] = useState<DataOf<"permissions.listPermissions">>([]);
  const [roles, setRoles] = useState<DataOf<"permissions.listRoles">>([]);
  const { error, run } = useAction();
  const load = async () => {
    setPermissions((await callPage("permissions.listPermissions", { limit: 100 })).items);
    setRoles((await callPage("permissions.listRoles", { limit: 100 })).items);
  };
  useEffect(() => {
    run(load);
  }, []);
  const remove = <N extends ProcedureName>(procedure: N, body: BodyOf<N>) =>
    run(async () => {
      await call(procedure, body);
      await load();
    });

  return (
    <>
      <h1>Permissions and roles</h1>
      <ErrorNote error={error} />
      <CreatePermission onCreated={() => run(load)} />
      <DataTable
        label="Permissions"
        columns={["Slug", "Name", "Description", "Actions"]}
        items={permissions}
        row={(permission) => (
          <tr key={permission.id}>
            <td>
              <code>{permission.slug}</code>
            </td>
            <td>{permission.name}</td>
            <td>{permission.description ?? ""}</td>
            <td>
              <ConfirmButton
                label="Delete"
                name={`Delete permission ${permission.slug}`}
                title={`Delete the permission ${permission.slug}?`}
                consequence={<p>Every key and role holding it loses it at once: requests that need it are refused.</p>}
                confirm={`Confirm deleting ${permission.slug}`}
                onConfirm={() => remove("permissions.deletePermission", { permission: permission.slug })}
              />
            </td>
          </tr>
        )}
      />
      <CreateRole onCreated={() => run(load)} />
      <DataTable
        label="Roles"
        columns={["Role", "Description", "Permissions", "Actions"]}
        items={roles}
        row={(role) => (
          <tr key={role.id}>
            <td>{role.name}</td>
            <td>{role.description ?? ""}</td>
            <td>{(role.permissions ?? []).map((permission) => permission.slug).join(", ")}</td>
            <td>
              <ConfirmButton
                label="Delete"
                name={`Delete role ${role.name}`}
                title={`Delete the role ${role.name}?`}
                consequence={<p>Every key with this role loses the permissions it gave at once.</p>}
                confirm={`Confirm deleting ${role.name}`}
                onConfirm={() => remove("permissions.deleteRole", { role: role.id })}
              />
            </td>
          </tr>
        )}
      />
    </>
  );
}

function CreatePermission(props: { onCreated: () => void }) {
  const [name, setName] = useState("");
  const [slug, setSlug] = useState("");
  const [description, setDescription] = useState("");
  const { error, run } = useAction();
  const submit = (event: Event) => {
    event.preventDefault();
    run(async () => {
      await call("permissions.createPermission", { name, slug, ...(description ? { description } : {}) });
      setName("");
      setSlug("");
      setDescription("");
      props.onCreated();
    });
  };
  return (
    <form onSubmit={submit} aria-label="Create a permission">
      <h2>Create a permission</h2>
      <div class="row">
        <TextField label="Permission slug" required value={slug} onValue={setSlug} error={fieldError(error, "body.slug")} />
        <TextField label="Permission name" required value={name} onValue={setName} error={fieldError(error, "body.name")} />
        <TextField
          label="Permission description"
          value={description}
          onValue={setDescription}
          error={fieldError(error, "body.description")}
        />
        <button type="submit">Create permission</button>
      </div>
      <FormError error={error} />
    </form>
  );
}

function CreateRole(props: { onCreated: () => void }) {
  const [name, setName] = useState("");
  const [description, setDescription] = useState("");
  const [permissions, setPermissions] = useState("");
  const { error, run } = useAction();
  const submit = (event: Event) => {
    event.preventDefault();
    run(async () => {
      await call("permissions.createRole", { name, ...(description ? { description } : {}), permissions: splitList(permissions) });
      setName("");
      setDescription("");
      setPermissions("");
      props.onCreated();
    });
  };
  return (
    <form onSubmit={submit} aria-label="Create a role">
      <h2>Create a role</h2>
      <div class="row">
        <TextField label="Role name" required value={name} onValue={setName} error={fieldError(error, "body.name")} />
        <TextField label="Role description" value={description} onValue={setDescription} error={fieldError(error, "body.description")} />
        <TextField
          label="Role permissions"
          hint="Slugs, one per line"
          rows={2}
          value={permissions}
          onValue={setPermissions}
          error={fieldError(error, "body.permissions")}
        />
        <button type="submit">Create role</button>
      </div>
      <FormError error={error} />
    </form>
  );
}
