import { useState } from "preact/hooks";
import { KeygateBrand } from "../../../ui/shell.js";
import { type Session, signIn } from "../api.js";
import { ErrorNote, fieldError, TextField, useAction } from "../ui.js";

export function SignInPage(props: { onSignedIn: (session: Session) => void }) {
  const [rootKey, setRootKey] = useState("");
  const { error, run } = useAction();
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    await run(async () => {
      const session = await signIn(rootKey);
      setRootKey("");
      props.onSignedIn(session);
    });
    setBusy(false);
  };
  return (
    <main class="sign-in">
      <div class="brand">
        <KeygateBrand />
      </div>
      <h1>Sign in to keygate</h1>
      <form onSubmit={submit}>
        <TextField
          label="Root key"
          type="password"
          autocomplete="off"
          required
          value={rootKey}
          onValue={setRootKey}
          error={fieldError(error, "body.rootKey")}
          hint="The session acts with this root key's permissions; the key is not stored in the browser."
        />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
      {!fieldError(error, "body.rootKey") && <ErrorNote error={error} />}
    </main>
  );
}
