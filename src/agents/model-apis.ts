// The model APIs several CLIs speak, as egress routes (spec.ts ModelRoute): the variables their
// SDKs read a base URL and a key from, the header each key goes in, the API's own address. A spec
// takes the ones its CLI reads (egress.routes), so the proxy can hold the key (worker/egress.ts).
// Sources: each CLI's base-URL variable is in ../shared/docs/agents.md and the specs' headers.
import type { ModelRoute } from './spec.js';

export const BEARER = ['authorization'];

export const ANTHROPIC: ModelRoute = {
  name: 'anthropic',
  baseUrl: ['ANTHROPIC_BASE_URL'],
  upstream: 'https://api.anthropic.com',
  keys: [
    { name: 'ANTHROPIC_API_KEY', headers: ['x-api-key'] },
    { name: 'ANTHROPIC_AUTH_TOKEN', headers: BEARER },
  ],
};

export const OPENAI: ModelRoute = {
  name: 'openai',
  baseUrl: ['OPENAI_BASE_URL'],
  upstream: 'https://api.openai.com/v1',
  keys: [{ name: 'OPENAI_API_KEY', headers: BEARER }],
};

export const GEMINI: ModelRoute = {
  name: 'gemini',
  baseUrl: ['GOOGLE_GEMINI_BASE_URL'],
  upstream: 'https://generativelanguage.googleapis.com',
  keys: [
    { name: 'GEMINI_API_KEY', headers: ['x-goog-api-key'] },
    { name: 'GOOGLE_API_KEY', headers: ['x-goog-api-key'] },
  ],
  offWhen: ['GOOGLE_GENAI_USE_VERTEXAI'],
};

/** The model APIs of the providers aider and opencode talk to, for their default hosts. */
export const PROVIDER_HOSTS = [
  'api.anthropic.com',
  'api.openai.com',
  'generativelanguage.googleapis.com',
  'api.deepseek.com',
  'openrouter.ai',
  'api.groq.com',
  'api.mistral.ai',
  'api.cohere.com',
  'api.x.ai',
];
