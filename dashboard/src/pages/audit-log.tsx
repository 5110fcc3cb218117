import { useEffect, useState } from "preact/hooks";
import { type BodyOf, callPage, type DataOf } from "../api.js";
import { DataTable, ErrorNote, fieldError, formatTime, fromDateTimeInput, Pager, TextField, useAction, useCursorPages } from "../ui.js";
import { ChangeView } from "./audit-changes.js";

const PAGE_SIZE = 50;

type Entry = DataOf<"keygate.listAuditLogs">[number];
type Filters = { action: string; actorId: string; resourceType: string; resourceId: string; start: string; end: string };

/**
 * The workspace's audit log, newest first, with keygate.listAuditLogs's filters; `#/audit-log/<type>/<id>` opens it
 * on one resource's history (a key's page links there).
 */
export function AuditLogPage(props: { resourceType?: string; resourceId?: string }) {
  const initial: Filters = {
    action: "",
    actorId: "",
    resourceType: props.resourceType ?? "",
    resourceId: props.resourceId ?? "",
    start: "",
    end: "",
  };
  const [draft, setDraft] = useState<Filters>(initial);
  const [entries, setEntries] = useState<Entry[]>([]);
  const pages = useCursorPages();
  const { error, run } = useAction();

  const load = (cursor: string | undefined, filters: Filters = draft) =>
    run(async () => {
      const start = fromDateTimeInput(filters.start);
      const end = fromDateTimeInput(filters.end);
      const body: BodyOf<"keygate.listAuditLogs"> = {
        limit: PAGE_SIZE,
        ...(cursor ? { cursor } : {}),
        ...(filters.action ? { action: filters.action as NonNullable<BodyOf<"keygate.listAuditLogs">["action"]> } : {}),
        ...(filters.actorId ? { actorId: filters.actorId } : {}),
        ...(filters.resourceType ? { resourceType: filters.resourceType } : {}),
        ...(filters.resourceId ? { resourceId: filters.resourceId } : {}),
        ...(start !== undefined ? { start } : {}),
        ...(end !== undefined ? { end } : {}),
      };
      const page = await callPage("keygate.listAuditLogs", body);
      setEntries(page.items);
      pages.setNext(page.cursor);
    });
  useEffect(() => {
    setDraft(initial);
    pages.restart();
    load(undefined, initial);
  }, [props.resourceType, props.resourceId]);

  const field = (name: keyof Filters) => (value: string) => setDraft({ ...draft, [name]: value });
  return (
    <>
      <h1>{props.resourceId ? `History of ${props.resourceType} ${props.resourceId}` : "Audit log"}</h1>
      <p class="muted">
        Entries outlive what they name: a record deleted since, or one kept by a keygate that ran without Redis (its records went when it
        stopped, its audit log stayed with the analytics engine), no longer exists.
      </p>
      <ErrorNote error={error} />
      <form
        aria-label="Filter the audit log"
        class="row"
        onSubmit={(event) => {
          event.preventDefault();
          pages.restart();
          load(undefined);
        }}
      >
        <TextField
          label="Action"
          hint="e.g. key.update"
          value={draft.action}
          onValue={field("action")}
          error={fieldError(error, "body.action")}
        />
        <TextField label="Actor id" value={draft.actorId} onValue={field("actorId")} />
        <TextField
          label="Resource type"
          hint="key, api, identity, rootKey, route…"
          value={draft.resourceType}
          onValue={field("resourceType")}
        />
        <TextField label="Resource id" value={draft.resourceId} onValue={field("resourceId")} />
        <TextField label="From (UTC)" type="datetime-local" value={draft.start} onValue={field("start")} />
        <TextField label="To (UTC)" type="datetime-local" value={draft.end} onValue={field("end")} />
        <button type="submit">Filter</button>
      </form>
      <DataTable
        label="Audit log entries"
        class="audit"
        columns={["Time", "Actor", "Action", "Resources", "Changes", "Description"]}
        empty="No entries match: change or clear the filters."
        items={entries}
        row={(entry) => (
          <tr key={entry.auditLogId}>
            <td>{formatTime(entry.time)}</td>
            <td>
              {entry.actor.type} <code>{entry.actor.id}</code> {entry.actor.name}
              <br />
              <small>{entry.context.clientAddress}</small>
            </td>
            <td>
              <code>{entry.action}</code>
            </td>
            <td>
              {entry.resources.map((resource) => (
                <div key={`${resource.type}:${resource.id}`}>
                  {resource.type} <code>{resource.id}</code>
                </div>
              ))}
            </td>
            <td class="changes">
              {entry.changes.map((change) => (
                <ChangeView key={change.field} change={change} />
              ))}
            </td>
            <td>{entry.description}</td>
          </tr>
        )}
      />
      <Pager label="Pages of the audit log" pages={pages} load={(cursor) => load(cursor)} />
    </>
  );
}
