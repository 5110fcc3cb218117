import { useEffect, useState } from "preact/hooks";
import { call, callPage } from "../api.js";
import { ErrorNote, Field, FormError, fieldError, splitList } from "../ui.js";

interface Permission {
  id: string;
  name: string;
  slug: string;
  description?: string;
}

interface Role {
  id: string;
  name: string;
  description?: string;
  permissions?: Permission[];
}

/** Permissions and roles of the workspace: list, create, delete (the API has no update for either). */
export function AccessPage() {
  const [permissions, setPermissions] = useState<Permission[]>([]);
  const [roles, setRoles] = useState<Role[]>([]);
  const [error, setError] = useState<unknown>(null);
  const load = async () => {
    try {
      setPermissions((await callPage<Permission>("permissions.listPermissions", { limit: 100 })).items);
      setRoles((await callPage<Role>("permissions.listRoles", { limit: 100 })).items);
    } catch (failure) {
      setError(failure);
    }
  };
  useEffect(() => {
    load();
  }, []);
  const remove = async (procedure: string, body: unknown) => {
    setError(null);
    try {
      await call(procedure, body);
      await load();
    } catch (failure) {
      setError(failure);
    }
  };

  return (
    <>
      <h1>Permissions and roles</h1>
      <ErrorNote error={error} />
      <CreatePermission onCreated={load} />
      <table aria-label="Permissions">
        <thead>
          <tr>
            <th scope="col">Slug</th>
            <th scope="col">Name</th>
            <th scope="col">Description</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {permissions.map((permission) => (
            <tr key={permission.id}>
              <td>
                <code>{permission.slug}</code>
              </td>
              <td>{permission.name}</td>
              <td>{permission.description ?? ""}</td>
              <td>
                <button
                  type="button"
                  aria-label={`Delete permission ${permission.slug}`}
                  onClick={() => remove("permissions.deletePermission", { permission: permission.slug })}
                >
                  Delete
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <CreateRole onCreated={load} />
      <table aria-label="Roles">
        <thead>
          <tr>
            <th scope="col">Role</th>
            <th scope="col">Description</th>
            <th scope="col">Permissions</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {roles.map((role) => (
            <tr key={role.id}>
              <td>{role.name}</td>
              <td>{role.description ?? ""}</td>
              <td>{(role.permissions ?? []).map((permission) => permission.slug).join(", ")}</td>
              <td>
                <button
                  type="button"
                  aria-label={`Delete role ${role.name}`}
                  onClick={() => remove("permissions.deleteRole", { role: role.id })}
                >
                  Delete
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

function CreatePermission(props: { onCreated: () => void }) {
  const [name, setName] = useState("");
  const [slug, setSlug] = useState("");
  const [description, setDescription] = useState("");
  const [error, setError] = useState<unknown>(null);
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    try {
      await call("permissions.createPermission", { name, slug, ...(description ? { description } : {}) });
      setName("");
      setSlug("");
      setDescription("");
      props.onCreated();
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <form onSubmit={submit} aria-label="Create a permission">
      <h2>Create a permission</h2>
      <div class="row">
        <Field label="Permission slug" error={fieldError(error, "body.slug")}>
          {(id, describedBy) => (
            <input id={id} required value={slug} aria-describedby={describedBy} onInput={(event) => setSlug(event.currentTarget.value)} />
          )}
        </Field>
        <Field label="Permission name" error={fieldError(error, "body.name")}>
          {(id, describedBy) => (
            <input id={id} required value={name} aria-describedby={describedBy} onInput={(event) => setName(event.currentTarget.value)} />
          )}
        </Field>
        <Field label="Permission description" error={fieldError(error, "body.description")}>
          {(id, describedBy) => (
            <input
              id={id}
              value={description}
              aria-describedby={describedBy}
              onInput={(event) => setDescription(event.currentTarget.value)}
            />
          )}
        </Field>
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
  const [error, setError] = useState<unknown>(null);
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    try {
      await call("permissions.createRole", { name, ...(description ? { description } : {}), permissions: splitList(permissions) });
      setName("");
      setDescription("");
      setPermissions("");
      props.onCreated();
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <form onSubmit={submit} aria-label="Create a role">
      <h2>Create a role</h2>
      <div class="row">
        <Field label="Role name" error={fieldError(error, "body.name")}>
          {(id, describedBy) => (
            <input id={id} required value={name} aria-describedby={describedBy} onInput={(event) => setName(event.currentTarget.value)} />
          )}
        </Field>
        <Field label="Role description" error={fieldError(error, "body.description")}>
          {(id, describedBy) => (
            <input
              id={id}
              value={description}
              aria-describedby={describedBy}
              onInput={(event) => setDescription(event.currentTarget.value)}
            />
          )}
        </Field>
        <Field label="Role permissions" hint="Slugs, one per line" error={fieldError(error, "body.permissions")}>
          {(id, describedBy) => (
            <textarea
              id={id}
              rows={2}
              value={permissions}
              aria-describedby={describedBy}
              onInput={(event) => setPermissions(event.currentTarget.value)}
            />
          )}
        </Field>
        <button type="submit">Create role</button>
      </div>
      <FormError error={error} />
    </form>
  );
}
