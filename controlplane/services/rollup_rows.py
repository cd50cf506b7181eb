"""Writing many rollup rows at once: plain tuples in, one COPY out on PostgreSQL.

The accounting task writes thousands of minute, hour and day rows a run (a catch-up after an
outage, hundreds of thousands). Through `bulk_create` each row was a model instance and each
value went through its field's preparation and a bound parameter of a 2,000-row INSERT: most of
a catch-up's time was Django building and flattening those objects, not PostgreSQL storing them
(docs/benchmarks.md, "Accounting catch-up"). Here rows are tuples of column values and go to
PostgreSQL in one COPY; an upsert copies them into a temporary table first and merges them with
one INSERT ... ON CONFLICT. Any other database (SQLite, which `make demo` uses) gets the plain
`bulk_create` it always had.

The values stored are the same either way: on PostgreSQL Django hands a Decimal, an int, a
float, a bool, a string and an aware datetime to psycopg unchanged, so COPY receives what the
INSERT did. The one conversion Django makes, a float for a decimal column (rounded to the
column's digits), is made here too. Columns a caller leaves out get their field's default, as a
model instance would (the tables have no defaults of their own).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.db import connections, models, router, transaction

#: Rows a non-PostgreSQL database gets per INSERT (as the accounting always used).
BATCH = 2000


def insert_rows(model: type[models.Model], columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
    """Insert `rows` (tuples of `columns`' values, by attname: "job_id", not "job") into
    `model`'s table. Returns the number of rows."""
    def copy_in(cursor: Any, fields: Sequence[models.Field[Any, Any]], values: list[Sequence[Any]]) -> None:
        _copy(cursor, model._meta.db_table, fields, values)

    return _write(model, columns, rows, {}, copy_in)


def upsert_rows(model: type[models.Model], columns: Sequence[str], rows: Iterable[Sequence[Any]],
                unique: Sequence[str], update: Sequence[str]) -> int:
    """Insert `rows`, or where a row with the same `unique` columns exists, overwrite its
    `update` columns and leave the others as they are (bulk_create's update_conflicts)."""
    def copy_in(cursor: Any, fields: Sequence[models.Field[Any, Any]], values: list[Sequence[Any]]) -> None:
        table = model._meta.db_table
        staged = f"qm_staged_{table}"
        names = ", ".join(_quote(f.column) for f in fields)
        conflict = ", ".join(_quote(model._meta.get_field(c).column) for c in unique)
        assignments = ", ".join(f"{_quote(c)} = EXCLUDED.{_quote(c)}"
                                for c in (model._meta.get_field(u).column for u in update))
        # Dropped at the end of this call: a run upserts into the same table more than once.
        cursor.execute(f"CREATE TEMPORARY TABLE {_quote(staged)} AS SELECT {names} FROM {_quote(table)} WITH NO DATA")
        _copy(cursor, staged, fields, values)
        cursor.execute(f"INSERT INTO {_quote(table)} ({names}) SELECT {names} FROM {_quote(staged)} "
                       f"ON CONFLICT ({conflict}) DO UPDATE SET {assignments}")
        cursor.execute(f"DROP TABLE {_quote(staged)}")

    conflicts = {"update_conflicts": True,
                 "unique_fields": [model._meta.get_field(c).name for c in unique],
                 "update_fields": [model._meta.get_field(c).name for c in update]}
    return _write(model, columns, rows, conflicts, copy_in)


def _write(model: type[models.Model], columns: Sequence[str], rows: Iterable[Sequence[Any]],
           bulk_options: dict[str, Any],
           copy_in: Callable[[Any, Sequence[models.Field[Any, Any]], list[Sequence[Any]]], None]) -> int:
    """`bulk_create` with `bulk_options` on any database but PostgreSQL; there, `copy_in` with
    every column completed, in one transaction."""
    rows = list(rows)
    if not rows:
        return 0
    db = router.db_for_write(model)
    connection = connections[db]
    if connection.vendor != "postgresql":
        model._default_manager.db_manager(db).bulk_create(
            _instances(model, columns, rows), batch_size=BATCH, **bulk_options)
        return len(rows)
    fields, values = _complete(model, columns, rows)
    with transaction.atomic(using=db, savepoint=False), connection.cursor() as cursor:
        copy_in(cursor, fields, values)
    return len(rows)


def _instances(model: type[models.Model], columns: Sequence[str], rows: list[Sequence[Any]]) -> list[Any]:
    return [model(**dict(zip(columns, row, strict=True))) for row in rows]


def _complete(model: type[models.Model], columns: Sequence[str], rows: list[Sequence[Any]]
              ) -> tuple[list[models.Field[Any, Any]], list[Sequence[Any]]]:
    """The caller's columns in its order, then every other concrete column but the generated id
    with its default (appended to each row); floats bound for a decimal column rounded as Django
    rounds them."""
    by_name = {f.attname: f for f in model._meta.concrete_fields
               if not (f.primary_key and isinstance(f, models.AutoField))}
    unknown = set(columns) - set(by_name)
    if unknown:
        raise ValueError(f"{model.__name__} has no column {', '.join(sorted(unknown))}")
    fields = [by_name[c] for c in columns]
    to_decimal = {i: f.to_python for i, f in enumerate(fields) if isinstance(f, models.DecimalField)}
    if any(type(row[i]) is float for row in rows for i in to_decimal):
        rows = [tuple(to_decimal[i](v) if i in to_decimal and type(v) is float else v for i, v in enumerate(row))
                for row in rows]
    given = set(columns)
    rest = [f for name, f in by_name.items() if name not in given]
    if rest:
        defaults = tuple(f.get_default() for f in rest)
        rows = [(*row, *defaults) for row in rows]
    return fields + rest, rows


def _copy(cursor: Any, table: str, fields: Sequence[models.Field[Any, Any]], rows: Iterable[Sequence[Any]]) -> None:
    names = ", ".join(_quote(f.column) for f in fields)
    with cursor.cursor.copy(f"COPY {_quote(table)} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
