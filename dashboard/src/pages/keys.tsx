import { useEffect, useState } from "preact/hooks";
import { DEFAULT_GRACE_MS, GracePeriodField, KeyState } from "../../../ui/key-state.js";
import { call, callPage, type DataOf } from "../api.js";
import {
  ConfirmButton,
  DataTable,
  ErrorNote,
  FormError,
  fieldError,
  formatTime,
  Pager,
  ShownOnce,
  TextField,
  useAction,
  useCursorPages,
} from "../ui.js";
import { createFields, EMPTY_KEY_FIELDS, fieldsOf, type KeyAsShown, KeyFieldControls, type KeyFields, updateFields } from "./key-form.js";
import { UsagePanel } from "./usage.js";

const PAGE_SIZE = 25;

/** The keys of one API: list (paginated, by external id), create, edit, reroll, reveal, delete. */
export function KeysPage(props: { apiId: string }) {
  const { apiId } = props;
  const [api, setApi] = useState<DataOf<"apis.getApi"> | null>(null);
  const [keys, setKeys] = useState<KeyAsShown[]>([]);
  const pages = useCursorPages();
  const [filter, setFilter] = useState("");
  const { error, setError, run } = useAction();
  const [shown, setShown] = useState<{ label: string; value: string } | null>(null);
  const [editing, setEditing] = useState<string | null>(null);

  const load = (cursor: string | undefined) =>
    run(async () => {
      const page = await callPage("apis.listKeys", {
        apiId,
        limit: PAGE_SIZE,
        decrypt: false,
        revalidateKeysCache: false,
        ...(cursor ? { cursor } : {}),
        ...(filter ? { externalId: filter } : {}),
      });
      setKeys(page.items);
      pages.setNext(page.cursor);
    });
  useEffect(() => {
    call("apis.getApi", { apiId }).then(setApi, setError);
    load(undefined);
  }, [apiId]);

  const reload = () => load(pages.current);

  return (
    <>
      <p>
        <a href="#/apis">← APIs</a>
      </p>
      <h1>Keys of {api?.name ?? apiId}</h1>
      <ErrorNote error={error} />
      {shown && <ShownOnce label={shown.label} value={shown.value} onDismiss={() => setShown(null)} />}
      <CreateKey
        apiId={apiId}
        onCreated={(key) => {
          setShown({ label: "New key", value: key });
          reload();
        }}
      />
      <h2>Keys</h2>
      <form
        class="row"
        aria-label="Filter keys"
        onSubmit={(event) => {
          event.preventDefault();
          pages.restart();
          load(undefined);
        }}
      >
        <TextField label="Filter by external id" value={filter} onValue={setFilter} error={fieldError(error, "body.externalId")} />
        <button type="submit">Filter</button>
      </form>
      <DataTable
        label="Keys"
        columns={["Key", "Name", "External id", "State", "Credits", "Created", "Actions"]}
        empty={filter ? "No keys with this external id." : "No keys yet: make the first with the form above."}
        items={keys}
        row={(key) => (
          <tr key={key.keyId}>
            <td>
              <code>{key.keyId}</code> <small>{key.start}…</small>
            </td>
            <td>{key.name ?? ""}</td>
            <td>{key.identity?.externalId ?? ""}</td>
            <td>
              <KeyState enabled={key.enabled} expires={key.expires} formatTime={formatTime} />
            </td>
            <td>{key.credits ? (key.credits.remaining ?? "unlimited") : "unlimited"}</td>
            <td>{formatTime(key.createdAt)}</td>
            <td>
              <button type="button" aria-label={`Edit ${key.keyId}`} onClick={() => setEditing(key.keyId)}>
                Edit
              </button>
            </td>
          </tr>
        )}
      />
      <Pager label="Pages of keys" pages={pages} load={load} />
      {editing && (
        <EditKey
          keyId={editing}
          onDone={(secret) => {
            if (secret) setShown(secret);
            setEditing(null);
            reload();
          }}
        />
      )}
    </>
  );
}

function CreateKey(props: { apiId: string; onCreated: (key: string) => void }) {
  const [fields, setFields] = useState<KeyFields>(EMPTY_KEY_FIELDS);
  const [prefix, setPrefix] = useState("");
  const [byteLength, setByteLength] = useState("16");
  const [recoverable, setRecoverable] = useState(false);
  const { error, run } = useAction();
  const submit = (event: Event) => {
    event.preventDefault();
    run(async () => {
      const body = {
        apiId: props.apiId,
        ...createFields(fields),
        ...(prefix ? { prefix } : {}),
        byteLength: Number(byteLength),
        recoverable,
      };
      const created = await call("keys.createKey", body);
      setFields(EMPTY_KEY_FIELDS);
      props.onCreated(created.key);
    });
  };
  return (
    <details>
      <summary>Create a key</summary>
      <form onSubmit={submit} aria-label="Create a key">
        <KeyFieldControls
          fields={fields}
          onChange={setFields}
          error={error}
          extra={
            <>
              <TextField label="Prefix" value={prefix} onValue={setPrefix} error={fieldError(error, "body.prefix")} />
              <TextField
                label="Byte length"
                type="number"
                value={byteLength}
                onValue={setByteLength}
                error={fieldError(error, "body.byteLength")}
              />
              <div class="field checkbox">
                <label>
                  <input type="checkbox" checked={recoverable} onChange={(event) => setRecoverable(event.currentTarget.checked)} />{" "}
                  Recoverable (stored encrypted)
                </label>
              </div>
            </>
          }
        />
        <button type="submit">Create key</button>
        <FormError error={error} instead="The key was not created: see the fields marked above." />
      </form>
    </details>
  );
}

function EditKey(props: { keyId: string; onDone: (secret?: { label: string; value: string }) => void }) {
  const [key, setKey] = useState<KeyAsShown | null>(null);
  const [fields, setFields] = useState<KeyFields>(EMPTY_KEY_FIELDS);
  const { error, setError, run: act } = useAction();
  const [grace, setGrace] = useState(DEFAULT_GRACE_MS);
  const [revealed, setRevealed] = useState<string | null>(null);
  useEffect(() => {
    call("keys.getKey", { keyId: props.keyId, decrypt: false }).then((read) => {
      setKey(read);
      setFields(fieldsOf(read));
    }, setError);
  }, [props.keyId]);

  const save = (event: Event) => {
    event.preventDefault();
    act(async () => {
      await call("keys.updateKey", { keyId: props.keyId, ...updateFields(fields) });
      props.onDone();
    });
  };
  return (
    <section aria-label={`Key ${props.keyId}`} class="editor">
      <h2>Key {props.keyId}</h2>
      <p>
        <a href={`#/audit-log/key/${encodeURIComponent(props.keyId)}`}>History of this key</a>
      </p>
      {key && (
        <form onSubmit={save} aria-label="Edit the key">
          <KeyFieldControls fields={fields} onChange={setFields} error={error} />
          <button type="submit">Save key</button>{" "}
          <button type="button" onClick={() => props.onDone()}>
            Close
          </button>
        </form>
      )}
      <div class="actions">
        <ConfirmButton
          label="Reroll key"
          title={`Reroll key ${props.keyId}?`}
          consequence={
            <p>
              A new key with this key's settings is made and shown once. The old key goes on working for the grace period chosen here, then
              is refused as expired: give the new key to whoever uses the old one before then.
            </p>
          }
          confirm="Reroll the key"
          onConfirm={() =>
            act(async () => {
              const rerolled = await call("keys.rerollKey", { keyId: props.keyId, expiration: grace });
              props.onDone({ label: "New key", value: rerolled.key });
            })
          }
        >
          <GracePeriodField label="The old key keeps working for" value={grace} onValue={setGrace} />
        </ConfirmButton>
        <button
          type="button"
          onClick={() =>
            act(async () => {
              const read = await call("keys.getKey", { keyId: props.keyId, decrypt: true });
              setRevealed(read.plaintext ?? "This key is not recoverable.");
            })
          }
        >
          Reveal key
        </button>
        <ConfirmButton
          label="Delete key"
          title={`Delete key ${props.keyId}?`}
          consequence={
            <p>Requests with this key are refused at once, on every instance, and its credits are gone. This cannot be undone.</p>
          }
          confirm="Confirm deleting the key"
          onConfirm={() =>
            act(async () => {
              await call("keys.deleteKey", { keyId: props.keyId, permanent: false });
              props.onDone();
            })
          }
        />
      </div>
      {revealed && <output aria-label="Revealed key">{revealed}</output>}
      <FormError error={error} instead="The key was not saved: see the fields marked above." />
      <UsagePanel scope={{ keyId: props.keyId }} label={`Usage of key ${props.keyId}`} />
    </section>
  );
}
