// A real OpenID provider (npm oidc-provider) on 127.0.0.1 for the
// `a2a auth login` tests: one confidential client for the
// client-credentials grant, one public client for the device flow, JWT
// access tokens (RS256) for the resource given in A2A_RESOURCE, and a
// short token lifetime (A2A_TOKEN_TTL seconds) so refresh can be tested.
// Prints "ISSUER <url>" once it listens.
import http from 'node:http';
import Provider from 'oidc-provider';

const resource = process.env.A2A_RESOURCE || 'urn:a2a:agent';
const ttl = Number(process.env.A2A_TOKEN_TTL || 300);

const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address();
  const issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: 'a2a-service',
        client_secret: 'service-secret',
        grant_types: ['client_credentials'],
        redirect_uris: [],
        response_types: [],
      },
      {
        client_id: 'a2a-cli',
        token_endpoint_auth_method: 'none',
        grant_types: ['urn:ietf:params:oauth:grant-type:device_code', 'refresh_token'],
        redirect_uris: [],
        response_types: [],
      },
    ],
    scopes: ['openid', 'offline_access', 'a2a'],
    features: {
      clientCredentials: { enabled: true },
      deviceFlow: { enabled: true },
      devInteractions: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => resource,
        useGrantedResource: () => true,
        getResourceServerInfo: () => ({
          scope: 'a2a',
          audience: resource,
          accessTokenFormat: 'jwt',
          accessTokenTTL: ttl,
        }),
      },
    },
    issueRefreshToken: async () => true,
    ttl: { AccessToken: ttl, ClientCredentials: ttl, DeviceCode: 300 },
  });
  server.on('request', provider.callback());
  console.log(`ISSUER ${issuer}`);
});
