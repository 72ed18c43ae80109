// The OpenAPI 3.1 description of /v1, served at GET /v1/openapi.json (no token needed: it
// holds no data). Limits and the role table are filled in from the running configuration.
import type { RoleTable } from './auth.js';
import type { ControlConfig } from './config.js';
import { CONTROL_ENTRY_TYPES } from './recorder.js';

const error = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});

export function openApiDocument(cfg: ControlConfig, roles: RoleTable): Record<string, unknown> {
  const L = cfg.lease;
  const roleLines = Object.entries(roles.table())
    .map(([r, v]) => `| ${r} | ${v.operations.join(', ')} | ${v.mfa ? 'yes' : 'no'} |`)
    .join('\n');
  const auth = { security: [{ bearer: [] }] };
  const common401 = {
    '401': error(
      'No, malformed or invalid access token (see error.reason); WWW-Authenticate carries the RFC 6750 challenge.',
    ),
  };
  const common403 = {
    '403': error(
      "The caller's roles do not grant the operation (forbidden), or phishing-resistant MFA is required (mfa_required). The denial is recorded; error.decision_id and error.ledger_entry_id name it.",
    ),
  };
  const common503 = { '503': error('The identity provider or the ledger is unavailable; retry after Retry-After.') };
  return {
    openapi: '3.1.0',
    info: {
      title: 'Stele enterprise control plane',
      version: '1.0.0',
      description: [
        'Access leases, Cedar policy decisions, KEK epochs and a signed audit stream. Every decision is anchored in the Stele ledger: the response carries the ledger entry id, and the audit event carries the record whose SHA-256 (RFC 8785 JSON) is the entry digest.',
        '',
        `Authentication: \`Authorization: Bearer <access token>\`, an OIDC access token (JWT, RFC 9068) from ${cfg.oidc.issuer} for audience ${cfg.oidc.audience.join(' or ')}, signed with ${cfg.oidc.algorithms.join('/')}. Roles come from the \`${cfg.oidc.rolesClaim}\` claim; phishing-resistant MFA from \`amr\` (${cfg.oidc.mfaAmr.join(', ')}) or \`acr\` (${cfg.oidc.mfaAcr.join(', ')}).`,
        '',
        '| role | operations | MFA required |',
        '|---|---|---|',
        roleLines,
        '',
        'Errors: `{"error": {"code", "message", …}}` with the HTTP status; extra fields (reason, decision_id, ledger_entry_id) appear where relevant.',
      ].join('\n'),
    },
    servers: [{ url: '/' }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      schemas: {
        Error: {
          type: 'object',
          required: ['error'],
          properties: {
            error: {
              type: 'object',
              required: ['code', 'message'],
              properties: {
                code: { type: 'string', examples: ['invalid_token', 'mfa_required', 'invalid_ttl', 'access_denied'] },
                message: { type: 'string' },
                reason: { type: 'string' },
                decision_id: { type: 'string' },
                ledger_entry_id: { type: 'string' },
              },
            },
          },
        },
        EntityRef: {
          description: 'A Cedar entity: {"type","id"} or the string form Type::"id".',
          oneOf: [
            {
              type: 'object',
              required: ['type', 'id'],
              additionalProperties: false,
              properties: { type: { type: 'string', examples: ['User'] }, id: { type: 'string', maxLength: 1024 } },
            },
            { type: 'string', examples: ['User::"alice"'] },
          ],
        },
        EvaluateRequest: {
          type: 'object',
          required: ['principal', 'action', 'resource'],
          additionalProperties: false,
          properties: {
            principal: { $ref: '#/components/schemas/EntityRef' },
            action: { $ref: '#/components/schemas/EntityRef' },
            resource: { $ref: '#/components/schemas/EntityRef' },
            context: { type: 'object', description: 'Cedar context record (JSON; integers only, no null).' },
          },
        },
        Decision: {
          type: 'object',
          required: ['decision', 'decision_id', 'policy_version', 'reasons', 'ledger_entry_id'],
          properties: {
            decision: { enum: ['allow', 'deny'] },
            decision_id: { type: 'string', pattern: '^dec_[0-9A-Z]{26}$' },
            policy_version: { type: 'string', pattern: '^pv_[0-9a-f]{16}$' },
            reasons: {
              type: 'array',
              items: { type: 'string' },
              description: 'Ids of the determining policies (empty: default deny).',
            },
            errors: {
              type: 'array',
              items: { type: 'string' },
              description: 'Policies that failed to evaluate (skipped).',
            },
            ledger_entry_id: { type: 'string', pattern: '^led_[0-9]+_[0-9a-f]{12}$' },
            audit_event_id: { type: 'integer' },
          },
        },
        LeaseRequest: {
          type: 'object',
          required: ['doc_id', 'compartment'],
          additionalProperties: false,
          properties: {
            doc_id: { type: 'string', maxLength: 256 },
            compartment: { type: 'string', maxLength: 128 },
            ttl: {
              type: 'string',
              pattern: '^[0-9]+s$',
              description: `Lifetime, ${L.ttlMinS}s to ${L.ttlMaxS}s; default ${L.ttlDefaultS}s.`,
            },
          },
        },
        Lease: {
          type: 'object',
          required: [
            'lease_id',
            'wrapped_dek',
            'expires',
            'epoch',
            'kek_id',
            'decision_id',
            'policy_version',
            'ledger_entry_id',
          ],
          properties: {
            lease_id: { type: 'string', pattern: '^lse_[0-9A-Z]{26}$' },
            wrapped_dek: {
              type: 'string',
              description:
                'base64url envelope: version, KEK provider, epoch, expiry, wrapped 256-bit DEK (bound to lease id, epoch and expiry).',
            },
            expires: { type: 'string', format: 'date-time' },
            epoch: { type: 'integer' },
            kek_id: { type: 'string' },
            decision_id: { type: 'string' },
            policy_version: { type: 'string' },
            ledger_entry_id: { type: 'string' },
            audit_event_id: { type: 'integer' },
          },
        },
        EpochRecord: {
          type: 'object',
          description:
            'Signed key-epoch record. signature = ed25519 over "stele/control/key-epoch/v1\\n" ‖ RFC 8785 JSON of the record without signature, record_hash, ledger_entry_id and status; record_hash = SHA-256 of the RFC 8785 JSON of the signed record (signature included); previous_record_hash chains the records.',
          required: [
            'v',
            'epoch',
            'kek_id',
            'kek_provider',
            'created',
            'created_by',
            'previous_record_hash',
            'key_id',
            'signature',
            'record_hash',
            'ledger_entry_id',
            'status',
          ],
          properties: {
            v: { const: 1 },
            epoch: { type: 'integer', minimum: 1 },
            kek_id: { type: 'string' },
            kek_provider: { enum: ['local', 'aws-kms', 'pkcs11'] },
            created: { type: 'string', format: 'date-time' },
            created_by: { type: 'string' },
            previous_record_hash: { type: 'string', pattern: '^[0-9a-f]{64}$' },
            retires: { type: 'array', items: { type: 'integer' } },
            key_id: { type: 'string', pattern: '^[0-9a-f]{64}$' },
            signature: { type: 'string', pattern: '^ed25519:' },
            record_hash: { type: 'string', pattern: '^[0-9a-f]{64}$' },
            ledger_entry_id: { type: ['string', 'null'] },
            status: { enum: ['current', 'active', 'retired'] },
          },
        },
        AuditEvent: {
          type: 'object',
          description:
            'Signed audit event. signature = ed25519 over "stele/control/audit-event/v1\\n" ‖ RFC 8785 JSON of the event without signature; digest = SHA-256 of the RFC 8785 JSON of record = the digest of ledger entry ledger_entry_id.',
          required: ['v', 'id', 'type', 'time', 'record', 'digest', 'ledger_entry_id', 'key_id', 'signature'],
          properties: {
            v: { const: 1 },
            id: { type: 'integer', description: 'Gap-free sequence number; the SSE id.' },
            type: { enum: [...CONTROL_ENTRY_TYPES] },
            time: { type: 'string', format: 'date-time' },
            record: { type: 'object' },
            digest: { type: 'string', pattern: '^[0-9a-f]{64}$' },
            ledger_entry_id: { type: 'string' },
            key_id: { type: 'string' },
            signature: { type: 'string' },
          },
        },
      },
    },
    paths: {
      '/v1/policy/evaluate': {
        post: {
          summary: 'Evaluate an access decision with Cedar (operation policy.evaluate)',
          ...auth,
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/EvaluateRequest' } } },
          },
          responses: {
            '200': {
              description: 'The decision (allow or deny), anchored as a policy_evaluation entry.',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Decision' } } },
            },
            '400': error(
              'Invalid input (invalid_json, missing_principal, invalid_context, invalid_request, …); nothing is recorded.',
            ),
            ...common401,
            ...common403,
            '413': error('Body too large.'),
            '415': error('Body is not application/json.'),
            ...common503,
          },
        },
      },
      '/v1/access/lease': {
        post: {
          summary: 'Issue an access lease (operation access.lease)',
          description: `Evaluates policy (principal ${L.principalType}::"<sub>", action Action::"${L.action}", resource ${L.resourceType}::"<doc_id>", context {compartment, ttl_seconds, roles, mfa, client_id}); on allow, wraps a fresh 256-bit DEK under the current KEK epoch. Anchored as an access_decision entry (Granted or Denied).`,
          ...auth,
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/LeaseRequest' } } },
          },
          responses: {
            '201': {
              description: 'The lease.',
              content: { 'application/json': { schema: { $ref: '#/components/schemas/Lease' } } },
            },
            '400': error(
              `Invalid input; invalid_ttl when ttl is outside ${L.ttlMinS}s–${L.ttlMaxS}s. Nothing is recorded.`,
            ),
            ...common401,
            '403': error(
              'access_denied: policy denies the lease (error.decision_id, error.ledger_entry_id); or forbidden / mfa_required.',
            ),
            ...common503,
          },
        },
      },
      '/v1/keys/rotate': {
        post: {
          summary: 'Start a new KEK epoch (operation keys.rotate; admin, MFA)',
          ...auth,
          requestBody: {
            required: false,
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  additionalProperties: false,
                  properties: {
                    retire_before: {
                      type: 'integer',
                      description:
                        'Retire every active epoch below this number: its KEK is destroyed (local) or disabled (KMS) and its leases no longer unwrap.',
                    },
                  },
                },
              },
            },
          },
          responses: {
            '201': {
              description: 'The new epoch record, anchored as a key_epoch entry.',
              content: {
                'application/json': {
                  schema: {
                    type: 'object',
                    properties: {
                      epoch: { $ref: '#/components/schemas/EpochRecord' },
                      ledger_entry_id: { type: 'string' },
                    },
                  },
                },
              },
            },
            '400': error('Invalid input.'),
            ...common401,
            ...common403,
            '409': error('Another rotation happened first.'),
            ...common503,
          },
        },
      },
      '/v1/keys/epochs': {
        get: {
          summary: 'List the signed key epochs (operation keys.read)',
          ...auth,
          responses: {
            '200': {
              description: 'The signer identity and the chain of epoch records, oldest first.',
              content: {
                'application/json': {
                  schema: {
                    type: 'object',
                    properties: {
                      signer: {
                        type: 'object',
                        properties: {
                          name: { type: 'string' },
                          key_id: { type: 'string' },
                          public_key: { type: 'string', description: 'base64 raw Ed25519 public key' },
                          algorithm: { const: 'Ed25519' },
                        },
                      },
                      current: { type: 'integer' },
                      epochs: { type: 'array', items: { $ref: '#/components/schemas/EpochRecord' } },
                    },
                  },
                },
              },
            },
            ...common401,
            ...common403,
          },
        },
      },
      '/v1/audit/events': {
        get: {
          summary: 'Stream signed audit events (Server-Sent Events; operation audit.read; admin or analyst, MFA)',
          description:
            'text/event-stream; each event is `id: <n>`, `event: <type>`, `data: <AuditEvent JSON>`. Resume with the Last-Event-ID header (or ?after=); ids are gap-free, so a resumed stream has no gaps or duplicates. With follow=false (or an until in the past) the stream ends after the stored events.',
          ...auth,
          parameters: [
            {
              name: 'type',
              in: 'query',
              schema: { type: 'string' },
              description: `Comma-separated event types: ${CONTROL_ENTRY_TYPES.join(', ')}.`,
            },
            {
              name: 'since',
              in: 'query',
              schema: { type: 'string', format: 'date-time' },
              description: 'Events at or after this time.',
            },
            {
              name: 'until',
              in: 'query',
              schema: { type: 'string', format: 'date-time' },
              description: 'Events before this time; the stream ends there.',
            },
            {
              name: 'after',
              in: 'query',
              schema: { type: 'integer' },
              description: 'Start after this event id (Last-Event-ID takes precedence).',
            },
            {
              name: 'follow',
              in: 'query',
              schema: { type: 'boolean', default: true },
              description: 'Keep the stream open for new events.',
            },
            { name: 'Last-Event-ID', in: 'header', schema: { type: 'string' } },
          ],
          responses: {
            '200': {
              description: 'The event stream.',
              content: { 'text/event-stream': { schema: { type: 'string' } } },
            },
            '400': error('Invalid filter or Last-Event-ID.'),
            ...common401,
            ...common403,
          },
        },
      },
      '/v1/openapi.json': {
        get: { summary: 'This document (no token needed)', responses: { '200': { description: 'OpenAPI 3.1 JSON.' } } },
      },
    },
  };
}
