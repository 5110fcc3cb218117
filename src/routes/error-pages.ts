import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ERROR_CATALOGUE, type ErrorCode, KEYGATE_ERRORS_PATH } from "../errors/catalogue.js";
import { KeygateError } from "../errors/keygate-error.js";
import { DASHBOARD_SECURITY_HEADERS } from "../http/dashboard-session.js";

/**
 * `GET /v2/errors`: the error catalogue, and `GET /v2/errors/{system}/{category}/{specific}`: one code's page (its
 * status, title and meaning), in HTML or, for a client that asks for it, JSON. keygate's own codes link here from
 * their `error.type` (errorTypeUrl), since Unkey's documentation has no page for them (docs/errors.md).
 */
export async function errorPages(app: FastifyInstance): Promise<void> {
  app.get(KEYGATE_ERRORS_PATH, async (request, reply) => {
    const codes = Object.keys(ERROR_CATALOGUE) as ErrorCode[];
    if (wantsJson(request)) return answer(reply, "application/json; charset=utf-8", JSON.stringify(codes.map(entryOf)));
    const rows = codes.map((code) => {
      const { status, title } = ERROR_CATALOGUE[code];
      return `<tr><td><a href="${KEYGATE_ERRORS_PATH}/${pathOf(code)}"><code>${code}</code></a></td><td>${status}</td><td>${htmlText(title)}</td></tr>`;
    });
    return answer(
      reply,
      "text/html; charset=utf-8",
      page(
        "keygate's error codes",
        `<p>Every error keygate answers with, by its code.</p>
<table><thead><tr><th scope="col">Code</th><th scope="col">Status</th><th scope="col">Title</th></tr></thead><tbody>
${rows.join("\n")}
</tbody></table>`,
      ),
    );
  });

  app.get<{ Params: { system: string; category: string; specific: string } }>(
    `${KEYGATE_ERRORS_PATH}/:system/:category/:specific`,
    async (request, reply) => {
      const { system, category, specific } = request.params;
      const code = `err:${system}:${category}:${specific}`;
      if (!Object.hasOwn(ERROR_CATALOGUE, code))
        throw new KeygateError("err:user:bad_request:route_not_found", `There is no error code '${code}'.`);
      const known = code as ErrorCode;
      if (wantsJson(request)) return answer(reply, "application/json; charset=utf-8", JSON.stringify(entryOf(known)));
      const { status, title, meaning } = ERROR_CATALOGUE[known];
      return answer(
        reply,
        "text/html; charset=utf-8",
        page(
          code,
          `<dl>
<dt>Status</dt><dd>${status} ${htmlText(title)}</dd>
<dt>Meaning</dt><dd>${withCode(meaning)}</dd>
</dl>
<p>The answer's <code>error.detail</code> says what happened to that request, and its <code>meta.requestId</code> finds
the request in keygate's log. <a href="${KEYGATE_ERRORS_PATH}">Every error code</a>.</p>`,
        ),
      );
    },
  );
}

function entryOf(code: ErrorCode): { code: ErrorCode; status: number; title: string; meaning: string } {
  return { code, ...ERROR_CATALOGUE[code] };
}

/** `err:keygate:gateway:missing_key` → `keygate/gateway/missing_key`. */
function pathOf(code: ErrorCode): string {
  return code.split(":").slice(1).join("/");
}

function wantsJson(request: FastifyRequest): boolean {
  const accept = request.headers.accept ?? "";
  return accept.includes("application/json") && !accept.includes("text/html");
}

function answer(reply: FastifyReply, type: string, body: string): FastifyReply {
  return reply.headers(DASHBOARD_SECURITY_HEADERS).header("cache-control", "public, max-age=3600").type(type).send(body);
}

function page(heading: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${htmlText(heading)}</title></head>
<body><main>
<h1>${htmlText(heading)}</h1>
${body}
</main></body>
</html>
`;
}

/** The catalogue's meanings write names in backticks, as Markdown does: shown as code. */
function withCode(text: string): string {
  return htmlText(text).replace(/`([^`]+)`/g, "<code>$1</code>");
}

function htmlText(text: string): string {
  return text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
}
