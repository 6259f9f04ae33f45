# -*- coding: utf-8 -*-
# Copyright: contributors to azure_imds.scheduled_events
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sign-in on the control-plane face: a service principal's token (what MSAL asks of Entra ID), a VM's
managed-identity token (IMDS's /metadata/identity path), bearer tokens checked on every Resource
Manager request, and the role grants behind a 403.

A mixin of MockState, beside ArmEndpoints (arm.py), which calls it through self."""

from __future__ import print_function

import collections
import secrets
from urllib.parse import parse_qsl

from .arm import IDENTITY_VERSIONS, arm_error
from .clock import iso_utc
from .imds import Response
from .rules import _json_bytes


class IdentityEndpoints(object):
    """Tokens and grants; the state (principals, tokens, grants) is made by ArmEndpoints._init_arm."""

    def _login(self, method, tenant, what, headers, body):
        base = "%s/login/%s" % (self.arm_base_url, tenant)
        if what.startswith("v2.0"):
            if method != "GET":
                return Response(405, _json_bytes({"error": "invalid_request"}))
            return Response(200, _json_bytes(collections.OrderedDict((
                ("token_endpoint", base + "/oauth2/v2.0/token"),
                ("token_endpoint_auth_methods_supported", ["client_secret_post", "private_key_jwt",
                                                           "client_secret_basic"]),
                ("jwks_uri", base + "/discovery/v2.0/keys"), ("response_modes_supported", ["query", "fragment", "form_post"]),
                ("subject_types_supported", ["pairwise"]), ("id_token_signing_alg_values_supported", ["RS256"]),
                ("response_types_supported", ["code", "id_token", "code id_token", "id_token token"]),
                ("scopes_supported", ["openid", "profile", "email", "offline_access"]),
                ("issuer", base + "/v2.0"), ("request_uri_parameter_supported", False),
                ("authorization_endpoint", base + "/oauth2/v2.0/authorize"),
                ("device_authorization_endpoint", base + "/oauth2/v2.0/devicecode"),
                ("end_session_endpoint", base + "/oauth2/v2.0/logout"), ("tenant_region_scope", "EU"),
                ("cloud_instance_name", "mock_imds"), ("cloud_graph_host_name", "localhost")))))
        if method != "POST":
            return Response(405, _json_bytes({"error": "invalid_request"}))
        form = dict(parse_qsl(body.decode("utf-8", "replace")))

        def refuse(status, error, code, text):
            return Response(status, _json_bytes(collections.OrderedDict((
                ("error", error), ("error_description", "%s: %s" % (code, text)), ("error_codes", [int(code[6:])]),
                ("timestamp", iso_utc(self._wallclock())), ("trace_id", "00000000-0000-0000-0000-000000000000"),
                ("correlation_id", "00000000-0000-0000-0000-000000000000")))))
        if form.get("grant_type") != "client_credentials":
            return refuse(400, "unsupported_grant_type", "AADSTS70003",
                          "The app requested an unsupported grant type; mock_imds serves client_credentials")
        client = form.get("client_id", "")
        sp = self._principals.get(client.lower())
        if sp is None or sp["tenant"].lower() != tenant.lower():
            return refuse(400, "unauthorized_client", "AADSTS700016", "Application with identifier '%s' was not "
                          "found in the directory '%s'." % (client[:100], tenant))
        if not secrets.compare_digest(form.get("client_secret", ""), sp["secret"]):
            return refuse(401, "invalid_client", "AADSTS7000215", "Invalid client secret provided. Ensure the "
                          "secret being sent in the request is the client secret value, not the client secret ID, "
                          "for a secret added to app '%s'." % sp["client_id"])
        scope = form.get("scope", "")
        if not self._audience_ok(scope.split(" ")[0].rsplit("/.default", 1)[0]):
            return refuse(400, "invalid_resource", "AADSTS500011", "The resource principal named %s was not found "
                          "in the tenant named %s." % (scope[:200], tenant))
        return Response(200, _json_bytes(self._issue(sp["client_id"])))

    def _audience_ok(self, resource):
        return resource.rstrip("/") == self.arm_base_url and bool(self.arm_base_url)

    def _issue(self, principal):
        token = "mock." + secrets.token_urlsafe(24)
        if len(self._tokens) > 100000:
            now = self._now()
            self._tokens = dict((t, v) for t, v in self._tokens.items() if v[1] > now)
        self._tokens[token] = (principal, self._now() + self._token_lifetime)
        return collections.OrderedDict((("token_type", "Bearer"), ("expires_in", self._token_lifetime),
                                        ("ext_expires_in", self._token_lifetime), ("access_token", token)))

    def identity_token(self, vm, params):
        """The managed-identity token path of IMDS (/metadata/identity/oauth2/token), lock held."""
        if params.get("api-version") not in IDENTITY_VERSIONS:
            return Response(400, _json_bytes({"error": "invalid_request",
                                              "error_description": "Required query variable 'api-version' is "
                                              "missing or not one of %s" % ", ".join(IDENTITY_VERSIONS)}))
        resource = params.get("resource", "")
        if not self._audience_ok(resource):
            return Response(400, _json_bytes({"error": "invalid_resource", "error_description":
                                              "AADSTS500011: The resource principal named %s was not found in "
                                              "the tenant." % resource[:200]}))
        issued = self._issue("%s-identity" % vm)
        now = int(self._now())
        return Response(200, _json_bytes(collections.OrderedDict((
            ("access_token", issued["access_token"]), ("client_id", "%s-identity" % vm),
            ("expires_in", str(self._token_lifetime)), ("expires_on", str(now + self._token_lifetime)),
            ("ext_expires_in", str(self._token_lifetime)), ("not_before", str(now)), ("resource", resource),
            ("token_type", "Bearer")))))

    def _bearer(self, headers):
        value = headers.get("Authorization") or ""
        if not value.lower().startswith("bearer "):
            return arm_error(401, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is "
                             "missing.")
        found = self._tokens.get(value[7:].strip())
        if found is None:
            return arm_error(401, "InvalidAuthenticationToken", "The access token is invalid.")
        if found[1] <= self._now():
            challenge = ('Bearer authorization_uri="%s/login/", error="invalid_token", error_description="The '
                         'access token has expired."' % self.arm_base_url)
            return arm_error(401, "ExpiredAuthenticationToken", "The access token expiry UTC time '%s' is earlier "
                             "than current UTC time '%s'." % (iso_utc(found[1]), iso_utc(self._now())),
                             (("WWW-Authenticate", challenge),))
        return found[0]

    def _roles(self, principal, scope):
        scope = scope.lower()
        return set(role for who, role, where in self._grants
                   if who == principal.lower() and (scope == where or scope.startswith(where.rstrip("/") + "/")))

    def _forbidden(self, principal, action, scope):
        return arm_error(403, "AuthorizationFailed", "The client '%s' with object id '%s' does not have "
                         "authorization to perform action '%s' over scope '%s' or the scope is invalid. If access "
                         "was recently granted, please refresh your credentials."
                         % (principal, principal, action, scope))
