"""The tool registry: each tool declared once, and what every front-end registers its tools from.

Runs in the tool process (no torch). A `Tool` names the function of the tool layer, its request and
result models and its flags, and says which front-ends expose it: `mcp` (the MCP server) and `policy`
(the agent loop, `KernelEnv` and the trainer adapters built on it). The request model is the one source
of every parameter's type, default and limits. The MCP server shows the request whole; a policy sees a
projection of it, the fields it may choose (`policy_fields`), while the environment fills in the rest
(device, audit, baselines: docs/DECISIONS.md, "The agent loop"). Front-ends build their schemas,
signatures and docstrings from these declarations when they start; nothing is generated into files.
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic.fields import FieldInfo

from cuda_agent_mcp.build import ProgressCallback

Surface = Literal["mcp", "policy"]
SURFACES: frozenset[Surface] = frozenset({"mcp", "policy"})
# A tool's function: (context, request, progress) -> result; the context is what `Tool.context` names.
Runner = Callable[[Any, Any, ProgressCallback | None], Awaitable[BaseModel]]
_NAME = re.compile(r"^[a-z][a-z_]*$")
# JSON-schema keywords that carry a limit, and how a description states each.
_LIMIT_WORDS = {
    "minimum": "at least {}",
    "exclusiveMinimum": "more than {}",
    "maximum": "at most {}",
    "exclusiveMaximum": "less than {}",
    "minLength": "at least {} characters",
    "maxLength": "at most {} characters",
    "minItems": "at least {} items",
    "maxItems": "at most {} items",
    "pattern": "matching {}",
}
LIMIT_KEYS = frozenset(_LIMIT_WORDS)


@dataclass(frozen=True)
class Tool:
    """One tool, as every front-end exposes it. Declaration mistakes raise TypeError at import."""

    name: str
    title: str
    description: str
    request: type[BaseModel]
    result: type[BaseModel]
    run: Runner = field(repr=False)
    # What `run` takes first (a Session, the TaskCatalog); a front-end that cannot supply it skips the tool.
    context: type = object
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    uses_gpu: bool = False
    # The MCP server runs it as a job: answered within the tool budget, else a handle for wait_job.
    long_running: bool = False
    surfaces: frozenset[Surface] = SURFACES
    # Dotted paths of the request fields a policy chooses (`verify.trials`); None: every field.
    policy_fields: tuple[str, ...] | None = None
    # MCP: the request is one optional object parameter of this name (tools whose arguments are all
    # settings); None: its fields are the tool's top-level parameters.
    nested: str | None = None

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise TypeError(f"tool name {self.name!r} must be lower_snake_case")
        for model in (self.request, self.result):
            if not (isinstance(model, type) and issubclass(model, BaseModel)):
                raise TypeError(f"tool {self.name}: {model!r} is not a pydantic model")
        if self.read_only and self.destructive:
            raise TypeError(f"tool {self.name} cannot be both read-only and destructive")
        if not self.surfaces <= SURFACES or not self.surfaces:
            raise TypeError(f"tool {self.name}: surfaces must be a non-empty subset of {sorted(SURFACES)}")
        if "policy" in self.surfaces:
            self.policy_args  # noqa: B018  (builds and checks the projection now, not at the first call)

    @property
    def policy_paths(self) -> list[tuple[str, ...]]:
        if self.policy_fields is None:
            return [(name,) for name in self.request.model_fields]
        return [tuple(path.split(".")) for path in self.policy_fields]

    @cached_property
    def policy_args(self) -> type[BaseModel]:
        """The arguments a policy gives: the policy fields of the request, under their last names, with
        the request's types, defaults and limits, and descriptions that state the limits (for front-ends
        whose schemas cannot carry them)."""
        fields: dict[str, Any] = {}
        for path in self.policy_paths:
            info = field_at(self.request, path)
            leaf = path[-1]
            if leaf in fields:
                raise TypeError(f"tool {self.name}: two policy fields are named {leaf!r}")
            if not info.description:
                raise TypeError(f"tool {self.name}: request field {'.'.join(path)} has no description")
            described = copy.copy(info)
            described.description = describe(info)
            fields[leaf] = (info.annotation, described)
        model_name = "".join(part.title() for part in self.name.split("_")) + "Args"
        return create_model(model_name, __config__=ConfigDict(frozen=True, extra="forbid"), **fields)

    def policy_schema(self) -> dict[str, Any]:
        """The JSON schema of the policy's arguments (OpenAI function `parameters`)."""
        schema = self.policy_args.model_json_schema()
        schema.pop("title", None)
        return schema

    def request_for(
        self, args: BaseModel | Mapping[str, Any], environment: Mapping[str, Any] | None = None
    ) -> BaseModel:
        """The whole request: the model's defaults, then the environment's settings wherever a (nested)
        request model has a field of that name, then what the policy chose. Validated by the request
        model, so its limits are the ones that hold."""
        chosen = args.model_dump(exclude_unset=True) if isinstance(args, BaseModel) else dict(args)
        data = _defaults(self.request)
        _apply_named(data, self.request, dict(environment or {}))
        for path in self.policy_paths:
            if path[-1] in chosen:
                _set_path(data, path, chosen[path[-1]])
        return self.request.model_validate(data)

    def signature(
        self,
        *,
        before: Sequence[inspect.Parameter] = (),
        after: Sequence[inspect.Parameter] = (),
        returns: Any = inspect.Signature.empty,
    ) -> inspect.Signature:
        """The signature of a function standing for this tool in a front-end that reads signatures (the
        MCP SDK): `before`, then the request's fields as keyword parameters (or, with `nested`, the request
        as one parameter, optional when all its fields are), then `after`."""
        if self.nested is None:
            middle = keyword_parameters(self.request)
        else:
            optional = not any(info.is_required() for info in self.request.model_fields.values())
            middle = [
                inspect.Parameter(
                    self.nested,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=None if optional else inspect.Parameter.empty,
                    annotation=self.request | None if optional else self.request,
                )
            ]
        return inspect.Signature([*before, *middle, *after], return_annotation=returns)

    async def __call__(
        self, context: Any, request: BaseModel, *, progress: ProgressCallback | None = None
    ) -> BaseModel:
        if not isinstance(context, self.context):
            raise TypeError(
                f"tool {self.name} runs on a {self.context.__name__}, not {type(context).__name__}"
            )
        if not isinstance(request, self.request):
            raise TypeError(f"tool {self.name} takes a {self.request.__name__}, not {type(request).__name__}")
        result = await self.run(context, request, progress)
        if not isinstance(result, self.result):
            raise TypeError(f"tool {self.name} returned {type(result).__name__}, not {self.result.__name__}")
        return result


class ToolRegistry(Mapping[str, Tool]):
    """Tools by name. `with_tools` makes a registry with more (tools a front-end declares itself)."""

    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise TypeError(f"tool {tool.name!r} is declared twice")
            self._tools[tool.name] = tool

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def exposed_on(self, surface: Surface) -> list[Tool]:
        return [tool for tool in self._tools.values() if surface in tool.surfaces]

    def with_tools(self, *tools: Tool) -> ToolRegistry:
        return ToolRegistry([*self._tools.values(), *tools])


def field_at(model: type[BaseModel], path: tuple[str, ...]) -> FieldInfo:
    """The field a dotted path names, through nested request models."""
    current: Any = model
    info: FieldInfo | None = None
    for depth, part in enumerate(path):
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            raise TypeError(f"{'.'.join(path[:depth])} of {model.__name__} is not a model")
        if part not in current.model_fields:
            raise TypeError(f"{model.__name__} has no field {'.'.join(path[: depth + 1])}")
        info = current.model_fields[part]
        current = info.annotation
    assert info is not None
    return info


def limits(info: FieldInfo) -> dict[str, Any]:
    """The JSON-schema limits of a field (minimum, maximum, minItems, pattern, ...)."""
    if not info.metadata:
        return {}
    # A type built at run time from the field: the checker cannot read it as a type expression.
    schema = TypeAdapter(Annotated[(info.annotation, *info.metadata)]).json_schema()  # type: ignore[arg-type]
    options = schema.get("anyOf", [schema])
    return {key: value for option in options for key, value in option.items() if key in LIMIT_KEYS}


def describe(info: FieldInfo) -> str:
    """A field's description with its limits in words: 'input sets (at least 1, at most 100)'."""
    found = limits(info)
    words = [_LIMIT_WORDS[key].format(found[key]) for key in _LIMIT_WORDS if key in found]
    words = [w.replace(" 1 items", " 1 item") for w in words]
    text = (info.description or "").rstrip(".")
    return f"{text} ({', '.join(words)})" if words else text


def keyword_parameters(model: type[BaseModel]) -> list[inspect.Parameter]:
    """One keyword-only parameter per field of `model`: `Annotated[type, *limits, Field(description)]`,
    defaulting as the field does. For front-ends that read a function's signature (TRL's tool methods,
    the MCP SDK's `@tool`)."""
    parameters = []
    for name, info in model.model_fields.items():
        # A type built at run time from the field: the checker cannot read it as a type expression.
        annotation = Annotated[(info.annotation, *info.metadata, Field(description=info.description))]  # type: ignore[name-defined]
        default = (
            inspect.Parameter.empty if info.is_required() else info.get_default(call_default_factory=True)
        )
        parameters.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        )
    return parameters


def as_function(
    implementation: Callable[..., Any], name: str, doc: str, signature: inspect.Signature
) -> Callable[..., Any]:
    """`implementation` (taking keyword arguments) under a name, docstring and signature that front-ends
    read: `inspect.signature` and `typing.get_type_hints` see the declared parameters."""
    implementation.__name__ = implementation.__qualname__ = name
    implementation.__doc__ = doc
    implementation.__signature__ = signature  # type: ignore[attr-defined]  # read by inspect.signature
    annotations = {p.name: p.annotation for p in signature.parameters.values() if p.annotation is not p.empty}
    if signature.return_annotation is not signature.empty:
        annotations["return"] = signature.return_annotation
    implementation.__annotations__ = annotations
    return implementation


def _defaults(model: type[BaseModel]) -> dict[str, Any]:
    """The fields of `model` that have defaults, nested models as dicts (so settings can be put in)."""
    data: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if info.is_required():
            continue
        value = info.get_default(call_default_factory=True, validated_data={})
        data[name] = value.model_dump() if isinstance(value, BaseModel) else value
    return data


def _apply_named(data: dict[str, Any], model: type[BaseModel], settings: dict[str, Any]) -> None:
    for name, info in model.model_fields.items():
        if name in settings:
            data[name] = settings[name]
            continue
        nested = info.annotation
        if isinstance(nested, type) and issubclass(nested, BaseModel) and isinstance(data.get(name), dict):
            _apply_named(data[name], nested, settings)


def _set_path(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for part in path[:-1]:
        data = data.setdefault(part, {})
    data[path[-1]] = value
