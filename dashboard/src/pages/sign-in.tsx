import { useState } from "preact/hooks";
import { type Session, signIn } from "../api.js";
import { ErrorNote, Field, fieldError } from "../ui.js";

export function SignInPage(props: { onSignedIn: (session: Session) => void }) {
  const [rootKey, setRootKey] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const session = await signIn(rootKey);
      setRootKey("");
      props.onSignedIn(session);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="sign-in">
      <h1>Sign in to keygate</h1>
      <form onSubmit={submit}>
        <Field
          label="Root key"
          error={fieldError(error, "body.rootKey")}
          hint="The session acts with this root key's permissions; the key is not stored in the browser."
        >
          {(id, describedBy) => (
            <input
              id={id}
              type="password"
              autocomplete="off"
              required
              value={rootKey}
              aria-describedby={describedBy}
              onInput={(event) => setRootKey(event.currentTarget.value)}
            />
          )}
        </Field>
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
      {!fieldError(error, "body.rootKey") && <ErrorNote error={error} />}
    </main>
  );
}
