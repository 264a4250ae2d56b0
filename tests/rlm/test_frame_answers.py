"""Typed RLM answers that are tables: ``output_type=DataFrameSchema(...)`` or a column → dtype mapping."""

from __future__ import annotations

import pandas as pd
import pytest

from tinyagents_nb.harness import ConfigurationError, StructuredOutputError
from tinyagents_nb.harness.testkit import ScriptedModel
from tinyagents_nb.rlm import RLM, DataFrameSchema, Environment

from ._scripts import py

pytestmark = pytest.mark.anyio

LOGS = ["ERROR disk", "INFO ok", "ERROR disk", "ERROR auth", "INFO ok"]
COUNT = (
    "import collections\n"
    "c = collections.Counter(l.split()[1] for l in logs if l.startswith('ERROR'))\n"
    "import pandas as pd\n"
    "df = pd.DataFrame({'kind': list(c), 'count': [float(v) + {fix} for v in c.values()]})\n"
    "answer.update(content=df, ready=True)"
)


async def test_a_dataframe_answer_is_checked_repaired_once_and_returned(environment: Environment) -> None:
    model = ScriptedModel([py(COUNT.replace("{fix}", "0.5")), py(COUNT.replace("{fix}", "0"))])
    rlm = RLM(model=model, environment=environment, output_type={"kind": "str", "count": "int64"})
    run = await rlm.invoke("Count the error kinds.", context={"logs": LOGS})
    assert run.structured is not None
    frame = run.structured.value
    assert isinstance(frame, pd.DataFrame)
    assert frame.to_dict("list") == {"kind": ["disk", "auth"], "count": [2, 1]}
    assert str(frame["count"].dtype) == "int64"
    assert run.structured.raw == [{"kind": "disk", "count": 2}, {"kind": "auth", "count": 1}]
    assert '"count": "int64"' in model.requests[0].messages[0].text  # the schema is in the system prompt
    reask = model.requests[1].messages[-1].text
    assert "column 'count': float values cannot be read as int64 without losing their fractions" in reask


async def test_a_table_that_fails_twice_is_a_clear_error() -> None:
    schema = DataFrameSchema({"kind": "str", "count": "int", "when": "datetime"}, strict=True, min_rows=1)
    model = ScriptedModel(
        [
            py("FINAL('kind count')"),  # a printout, not a table
            py("answer.update(content=[{'kind': 1, 'count': 'x', 'extra': 0}], ready=True)"),
            py("FINAL(1)"),
        ]
    )
    with pytest.raises(StructuredOutputError) as caught:
        await RLM(model=model, environment="local", output_type=schema).invoke("Table.", context={})
    message = str(caught.value)
    assert "after a re-ask" in message
    assert "column 'kind': int64 values are not strings" in message
    assert "values (like 'x') cannot be read as int64" in message
    assert "missing column 'when'" in message
    assert "unexpected column 'extra'" in message
    assert "not a DataFrame" in model.requests[1].messages[-1].text
    assert len(model.requests) == 2


def test_records_columns_and_datetimes_are_read_and_bad_schemas_refused() -> None:
    schema = DataFrameSchema({"when": "datetime", "n": "float"}, max_rows=2)
    frame, problem = schema.check('{"when": ["2026-11-26", "2026-11-27"], "n": [1, 2]}')
    assert problem is None
    assert str(frame["when"].dtype).startswith("datetime64")
    assert str(frame["n"].dtype) == "float64"
    _, problem = schema.check('[{"when": "2026-11-26", "n": 1}] ' * 1)
    assert problem is None
    _, problem = schema.check('[{"when": "x", "n": 1}, {"when": "y", "n": 2}, {"when": "z", "n": 3}]')
    assert problem is not None
    assert "cannot be read as datetime64[ns]" in problem
    assert "3 rows" in problem
    with pytest.raises(ConfigurationError, match="does not know the dtype"):
        DataFrameSchema({"a": "no-such-dtype"})
    with pytest.raises(ConfigurationError, match="at least one column"):
        DataFrameSchema({})
