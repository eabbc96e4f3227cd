"""Who a token belongs to and what a user may do: TokenRequest, TokenReview, SubjectAccessReview.

The stand-in does not authenticate or authorize its own callers: any token,
or none, may call it (see :func:`bench.simcluster.cluster.write_kubeconfig`).
What it does answer, as kube-apiserver does, are the review APIs that a
component delegating its own authentication and authorization asks
(kube-scheduler's and tandem's secure port: k8s.io/apiserver's delegating
authenticator and authorizer):

* ``POST serviceaccounts/NAME/token`` (TokenRequest) issues a token for a
  ServiceAccount, with audiences (the API audience by default) and an
  expiry (``expirationSeconds``, 3600 by default, at least 600). The token
  is opaque here (a JWT on the real server) and lives in memory: it is
  valid while it has not expired and the ServiceAccount with the same uid
  still exists.
* The kubeconfig token the simulated cluster writes, :data:`ADMIN_TOKEN`,
  is the user :data:`ADMIN_USER` in ``system:masters``, as envtest's static
  token is on the real test server.
* ``POST tokenreviews`` answers ``status.authenticated`` and ``status.user``
  (username, uid, groups with ``system:authenticated``, extra) and
  ``status.audiences``; an unknown token is ``authenticated: false`` with an
  empty user, as upstream's TokenReview REST handler answers.
* ``POST subjectaccessreviews`` evaluates the RBAC objects stored here
  (ClusterRoles, ClusterRoleBindings, Roles, RoleBindings) as kube-apiserver's
  RBAC authorizer does, for resource and non-resource attributes, after
  the privileged group ``system:masters``, which is always allowed. The
  answer is ``allowed`` with upstream's reason (``RBAC: allowed by
  ClusterRoleBinding "b" of ClusterRole "r" to User "u"``); RBAC never says
  ``denied``, so neither does this.

Not simulated: the bootstrap roles and bindings a real server creates
(``system:discovery``, ``system:monitoring``, ...), ClusterRole aggregation,
RBAC's escalation checks and rule validation, the Node authorizer, tokens
bound to pods or secrets, LocalSubjectAccessReview and the self reviews.
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any, Iterator

from bench.simcluster import errors
from bench.simcluster.resources import lookup
from bench.simcluster.store import Store, rfc3339

ADMIN_TOKEN = "tandem-sim"
ADMIN_USER = "simcluster-admin"
MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
# the API audience a token is for when a TokenRequest names none (kube-apiserver: --api-audiences,
# defaulting to the service account issuer)
API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"

DEFAULT_EXPIRATION = 3600       # TokenRequest's expirationSeconds default
MIN_EXPIRATION = 600            # "may not specify a duration less than 10 minutes"
MAX_EXPIRATION = 1 << 32

SERVICE_ACCOUNTS = lookup("", "v1", "serviceaccounts")
CLUSTER_ROLES = lookup("rbac.authorization.k8s.io", "v1", "clusterroles")
CLUSTER_ROLE_BINDINGS = lookup("rbac.authorization.k8s.io", "v1", "clusterrolebindings")
ROLES = lookup("rbac.authorization.k8s.io", "v1", "roles")
ROLE_BINDINGS = lookup("rbac.authorization.k8s.io", "v1", "rolebindings")

AUTHENTICATION_V1 = "authentication.k8s.io/v1"
AUTHORIZATION_V1 = "authorization.k8s.io/v1"


class _Token:
    __slots__ = ("namespace", "name", "uid", "audiences", "expires", "credential_id")

    def __init__(self, namespace: str, name: str, uid: str, audiences: list[str], expires: float) -> None:
        self.namespace, self.name, self.uid = namespace, name, uid
        self.audiences = audiences
        self.expires = expires
        self.credential_id = f"JTI={uuid.uuid4()}"


def service_account_username(namespace: str, name: str) -> str:
    return f"system:serviceaccount:{namespace}:{name}"


def _check_kind(body: Any, kind: str, api_version: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise errors.bad_request(f"the object provided is unrecognized (must be of type {kind})")
    if body.get("kind") not in (None, "", kind):
        raise errors.bad_request(f"the object provided is unrecognized (must be of type {kind}): "
                                 f"couldn't get version/kind; json parse error: kind {body.get('kind')!r}")
    if body.get("apiVersion") not in (None, "", api_version):
        raise errors.bad_request(f"the API version in the data ({body.get('apiVersion')}) does not match the "
                                 f"expected API version ({api_version})")
    for key in ("metadata", "spec"):
        if body.get(key) is not None and not isinstance(body[key], dict):
            raise errors.bad_request(f"{kind} in version \"v1\" cannot be handled as a {kind}: {key} must be an object")
    return body


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _field(obj: Any, key: str) -> Any:
    """``obj[key]``, or "" when ``obj`` is not an object or lacks it (Go's zero value)."""
    return (obj.get(key) or "") if isinstance(obj, dict) else ""


class Authority:
    """The tokens the stand-in issued, and the reviews it answers over its store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._tokens: dict[str, _Token] = {}

    # ------------------------------------------------------------------ TokenRequest

    def token_request(self, namespace: str, name: str, body: Any) -> dict[str, Any]:
        """``POST serviceaccounts/NAME/token``: the TokenRequest with ``status.token`` filled."""
        body = _check_kind(body, "TokenRequest", AUTHENTICATION_V1)
        spec = dict(body.get("spec") or {})
        seconds = spec.get("expirationSeconds", DEFAULT_EXPIRATION)
        if seconds is None:
            seconds = DEFAULT_EXPIRATION
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            raise errors.bad_request(f"TokenRequest in version \"v1\" cannot be handled as a TokenRequest: "
                                     f"expirationSeconds must be an integer, got {seconds!r}")
        causes = []
        if seconds < MIN_EXPIRATION:
            causes.append(errors.invalid_value("spec.expirationSeconds", seconds,
                                               "may not specify a duration less than 10 minutes"))
        elif seconds > MAX_EXPIRATION:
            causes.append(errors.invalid_value("spec.expirationSeconds", seconds,
                                               "may not specify a duration larger than 2^32 seconds"))
        if causes:
            raise errors.invalid("TokenRequest", name, causes, "authentication.k8s.io")
        sa = self.store.get(SERVICE_ACCOUNTS, namespace, name).obj()   # 404 when there is none
        audiences = _strings(spec.get("audiences")) or [API_AUDIENCE]
        now = self.store.clock()
        token = f"simcluster.{secrets.token_urlsafe(32)}"
        self._tokens[token] = _Token(namespace, name, sa["metadata"]["uid"], audiences, now + seconds)
        return {
            "kind": "TokenRequest", "apiVersion": AUTHENTICATION_V1,
            "metadata": {"name": name, "namespace": namespace, "creationTimestamp": rfc3339(now)},
            "spec": {"audiences": audiences, "expirationSeconds": seconds,
                     "boundObjectRef": spec.get("boundObjectRef")},
            "status": {"token": token, "expirationTimestamp": rfc3339(now + seconds)},
        }

    # ------------------------------------------------------------------ TokenReview

    def token_review(self, body: Any) -> dict[str, Any]:
        """``POST tokenreviews``: the review with ``status`` filled, as pkg/registry/authentication/tokenreview."""
        body = _check_kind(body, "TokenReview", AUTHENTICATION_V1)
        spec = body.get("spec") or {}
        token = spec.get("token")
        if not isinstance(token, str) or not token:
            raise errors.bad_request("token is required for TokenReview in authentication")
        wanted = _strings(spec.get("audiences")) or [API_AUDIENCE]
        status: dict[str, Any] = {"user": {}}
        user, audiences, error = self.authenticate(token, wanted)
        if user is not None:
            status = {"authenticated": True, "user": user, "audiences": audiences}
        elif error:
            status["error"] = error
        return {"kind": "TokenReview", "apiVersion": AUTHENTICATION_V1,
                "metadata": {"creationTimestamp": None, **(body.get("metadata") or {})},
                "spec": spec, "status": status}

    def authenticate(self, token: str,
                     audiences: list[str]) -> tuple[dict[str, Any] | None, list[str], str]:
        """(UserInfo or None, the audiences it is valid for, an error to report when refused)."""
        if token == ADMIN_TOKEN:     # a static token: valid for whatever audience is asked (audience-agnostic)
            return {"username": ADMIN_USER, "uid": ADMIN_USER, "groups": [MASTERS, AUTHENTICATED]}, audiences, ""
        t = self._tokens.get(token)
        if t is None:
            return None, [], ""
        if self.store.clock() >= t.expires:
            del self._tokens[token]
            return None, [], "[invalid bearer token, service account token has expired]"
        matched = [a for a in audiences if a in t.audiences]
        if not matched:
            return None, [], (f"[invalid bearer token, token audiences {_go_list(t.audiences)} is invalid for "
                              f"the target audiences {_go_list(audiences)}]")
        sa = self.store.get_obj(SERVICE_ACCOUNTS, t.namespace, t.name)
        if sa is None or sa["metadata"].get("uid") != t.uid:
            return None, [], "[invalid bearer token, service account token has been invalidated]"
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{t.namespace}", AUTHENTICATED]
        return {"username": service_account_username(t.namespace, t.name), "uid": t.uid, "groups": groups,
                "extra": {"authentication.kubernetes.io/credential-id": [t.credential_id]}}, matched, ""

    # ------------------------------------------------------------------ SubjectAccessReview

    def subject_access_review(self, body: Any) -> dict[str, Any]:
        """``POST subjectaccessreviews``: ``status.allowed`` and ``reason`` from RBAC."""
        body = _check_kind(body, "SubjectAccessReview", AUTHORIZATION_V1)
        spec = body.get("spec") or {}
        resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        causes = []
        # ValidateSubjectAccessReviewSpec, as kube-apiserver 1.36.2 words it: neither kind blames
        # resourceAttributes (null), both kinds blame nonResourceAttributes, shown as Go prints the internal
        # struct (its field names, every field, in declaration order)
        if resource is None and non_resource is None:
            causes.append(errors.invalid_value("spec.resourceAttributes", None, "exactly one of "
                                               "nonResourceAttributes or resourceAttributes must be specified"))
        elif resource is not None and non_resource is not None:
            shown = {"Path": str(_field(non_resource, "path")), "Verb": str(_field(non_resource, "verb"))}
            causes.append(errors.invalid_value("spec.nonResourceAttributes", shown,
                                               "cannot be specified in combination with resourceAttributes"))
        user, groups = spec.get("user") or "", _strings(spec.get("groups"))
        if not user and not groups:
            causes.append(errors.invalid_value("spec.user", user, "at least one of user or group must be specified"))
        if causes:
            raise errors.invalid("SubjectAccessReview", "", causes, "authorization.k8s.io")
        allowed, reason = self.authorize(user, groups, resource or {}, non_resource)
        status: dict[str, Any] = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        return {"kind": "SubjectAccessReview", "apiVersion": AUTHORIZATION_V1,
                "metadata": {"creationTimestamp": None, **(body.get("metadata") or {})},
                "spec": spec, "status": status}

    def authorize(self, user: str, groups: list[str], resource: dict[str, Any],
                  non_resource: dict[str, Any] | None) -> tuple[bool, str]:
        """(allowed, reason): the privileged group first, then RBAC (``rbac.go``'s visitor), first allow wins."""
        if MASTERS in groups:
            return True, ""
        namespace = "" if non_resource is not None else str(resource.get("namespace") or "")
        problems: list[str] = []
        for kind, binding, role, err in self._bindings(namespace, user, groups):
            if err:
                problems.append(err)
                continue
            for rule in role.get("rules") or []:
                if isinstance(rule, dict) and _rule_allows(rule, resource, non_resource):
                    return True, f"RBAC: allowed by {_describe(kind, binding, user, groups, namespace)}"
        if not problems:
            return False, ""
        return False, "RBAC: " + (problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]")

    def _bindings(self, namespace: str, user: str,
                  groups: list[str]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any], str]]:
        """(binding kind, binding, the role it grants, or an error naming a missing role) for the subject.

        ClusterRoleBindings first, then the namespace's RoleBindings, as upstream's VisitRulesFor.
        """
        sources = [("ClusterRoleBinding", e.obj()) for e in self._entries(CLUSTER_ROLE_BINDINGS)]
        if namespace:
            sources += [("RoleBinding", e.obj()) for e in self._entries(ROLE_BINDINGS)
                        if e.key[0] == namespace]
        for kind, binding in sources:
            own_ns = binding["metadata"].get("namespace", "")
            if not any(_applies(s, user, groups, own_ns) for s in binding.get("subjects") or []
                       if isinstance(s, dict)):
                continue
            ref = binding.get("roleRef") or {}
            role_kind, role_name = ref.get("kind"), ref.get("name", "")
            if role_kind == "ClusterRole":
                role = self.store.get_obj(CLUSTER_ROLES, "", role_name)
                missing = f'clusterrole.rbac.authorization.k8s.io "{role_name}" not found'
            elif role_kind == "Role" and kind == "RoleBinding":
                role = self.store.get_obj(ROLES, own_ns, role_name)
                missing = f'role.rbac.authorization.k8s.io "{role_name}" not found'
            else:
                continue
            yield (kind, binding, role, "") if role is not None else (kind, binding, {}, missing)

    def _entries(self, rt: Any) -> list[Any]:
        table = self.store.table(rt)
        return [table.objects[k] for k in table.sorted_keys()]


def _applies(subject: dict[str, Any], user: str, groups: list[str], binding_ns: str) -> bool:
    """rbac's appliesToUser."""
    kind, name = subject.get("kind"), subject.get("name", "")
    if kind == "User":
        return name == user
    if kind == "Group":
        return name in groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_ns
        return bool(ns) and user == service_account_username(ns, name)
    return False


def _describe(kind: str, binding: dict[str, Any], user: str, groups: list[str], namespace: str) -> str:
    """The allowed reason, as rbac's clusterRoleBindingDescriber / roleBindingDescriber print it."""
    meta, ref = binding["metadata"], binding.get("roleRef") or {}
    name = meta["name"] if kind == "ClusterRoleBinding" else f"{meta['name']}/{meta.get('namespace', '')}"
    subject = next(s for s in binding.get("subjects") or []
                   if isinstance(s, dict) and _applies(s, user, groups, meta.get("namespace", "")))
    if subject.get("kind") == "ServiceAccount":
        who = f'ServiceAccount "{subject.get("name", "")}/{subject.get("namespace") or meta.get("namespace", "")}"'
    else:
        who = f'{subject.get("kind")} "{subject.get("name", "")}"'
    return f'{kind} "{name}" of {ref.get("kind")} "{ref.get("name")}" to {who}'


def _rule_allows(rule: dict[str, Any], resource: dict[str, Any], non_resource: dict[str, Any] | None) -> bool:
    """rbac's RuleAllows: verbs, then the non-resource URL or the group, resource and name."""
    if non_resource is not None:
        verb, path = str(non_resource.get("verb") or ""), str(non_resource.get("path") or "")
        return _has(rule.get("verbs"), verb) and any(_url_matches(u, path) for u in _strings(rule.get("nonResourceURLs")))
    verb = str(resource.get("verb") or "")
    if not _has(rule.get("verbs"), verb) or not _has(rule.get("apiGroups"), str(resource.get("group") or "")):
        return False
    if not _resource_matches(_strings(rule.get("resources")), str(resource.get("resource") or ""),
                             str(resource.get("subresource") or "")):
        return False
    names = _strings(rule.get("resourceNames"))
    return not names or str(resource.get("name") or "") in names


def _has(values: Any, wanted: str) -> bool:
    found = _strings(values)
    return "*" in found or wanted in found


def _url_matches(rule: str, path: str) -> bool:
    """NonResourceURLMatches: exact, ``*``, or a prefix ending in ``*``."""
    if rule == "*" or rule == path:
        return True
    return rule.endswith("*") and path.startswith(rule.rstrip("*"))


def _resource_matches(rules: list[str], resource: str, subresource: str) -> bool:
    """ResourceMatches: ``*``, ``resource[/subresource]``, or ``*/subresource``."""
    combined = f"{resource}/{subresource}" if subresource else resource
    for r in rules:
        if r == "*" or r == combined:
            return True
        if subresource and r == f"*/{subresource}":
            return True
    return False


def _go_list(values: list[str]) -> str:
    """A []string as Go's %q prints it: ["a" "b"]."""
    return "[" + " ".join(f'"{v}"' for v in values) + "]"
