// The model APIs several CLIs speak, as egress routes (spec.ts ModelRoute): the variables their
// SDKs read a base URL and a key from, the header each key goes in, the API's own address. A spec
// takes the ones its CLI reads (egress.routes), so the proxy can hold the key (worker/egress.ts).
// Sources: each CLI's base-URL variable is in ../shared/docs/agents.md and the specs' headers.
import type { ModelRoute } from './spec.js';

export const BEARER = ['authorization'];
const key = (name: string, headers: readonly string[]) => ({ name, headers });

export const ANTHROPIC: ModelRoute = {
  name: 'anthropic',
  baseUrl: ['ANTHROPIC_BASE_URL'],
  upstream: 'https://api.anthropic.com',
  keys: [key('ANTHROPIC_API_KEY', ['x-api-key']), key('ANTHROPIC_AUTH_TOKEN', BEARER)],
};

export const OPENAI: ModelRoute = {
  name: 'openai',
  baseUrl: ['OPENAI_BASE_URL'],
  upstream: 'https://api.openai.com/v1',
  keys: [key('OPENAI_API_KEY', BEARER)],
};

export const GEMINI: ModelRoute = {
  name: 'gemini',
  baseUrl: ['GOOGLE_GEMINI_BASE_URL'],
  upstream: 'https://generativelanguage.googleapis.com',
  keys: [key('GEMINI_API_KEY', ['x-goog-api-key']), key('GOOGLE_API_KEY', ['x-goog-api-key'])],
  offWhen: ['GOOGLE_GENAI_USE_VERTEXAI'],
};

/** The variables of the providers aider and opencode talk to: their keys and endpoints. */
export const PROVIDER_ENV = [
  'ANTHROPIC_*',
  'OPENAI_*',
  'GEMINI_*',
  'DEEPSEEK_*',
  'OPENROUTER_*',
  'GROQ_*',
  'MISTRAL_*',
  'XAI_*',
  'AZURE_*',
];

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
