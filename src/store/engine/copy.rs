//! Copying a whole deployment's state into another database (`richbot migrate`). The
//! tables and their columns are read from the databases' catalogs, not listed here: both
//! sides are migrated to this build's schema first, so they must agree, and a table a new
//! migration adds is copied without touching this file. The copy is one transaction on the
//! target: it lands whole or not at all.

use futures::TryStreamExt;
use sqlx::any::AnyArguments;
use sqlx::query::Query;
use sqlx::{Any, Row};

use crate::store::{Backend, Error, Result, Store};

/// Values per INSERT statement (several rows each), well under both parameter limits.
const VALUES_PER_INSERT: usize = 500;

/// A table as the catalog describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    pub name: String,
    /// Column names, in order, and whether each holds integers (else text).
    columns: Vec<(String, bool)>,
}

/// One value on its way from one database to the other.
enum Value {
    Int(Option<i64>),
    Text(Option<String>),
}

impl Store {
    /// This database's tables (sqlx's bookkeeping aside), with their columns.
    pub async fn tables(&self) -> Result<Vec<Table>> {
        let sql = match self.backend {
            Backend::Sqlite => {
                "SELECT m.name AS tbl, p.name AS col, p.type AS ty FROM sqlite_master m, pragma_table_info(m.name) p
                 WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> '_sqlx_migrations'
                 ORDER BY m.name, p.cid"
            }
            Backend::Postgres => {
                "SELECT CAST(table_name AS TEXT) AS tbl, CAST(column_name AS TEXT) AS col, CAST(data_type AS TEXT) AS ty
                 FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name <> '_sqlx_migrations'
                 ORDER BY table_name, ordinal_position"
            }
        };
        let mut tables: Vec<Table> = Vec::new();
        for row in sqlx::query(sql).fetch_all(&self.pool).await? {
            let (name, column, ty): (String, String, String) =
                (row.try_get("tbl")?, row.try_get("col")?, row.try_get("ty")?);
            let integer = ty.to_ascii_uppercase().contains("INT");
            match tables.last_mut() {
                Some(t) if t.name == name => t.columns.push((column, integer)),
                _ => tables.push(Table { name, columns: vec![(column, integer)] }),
            }
        }
        Ok(tables)
    }

    /// Rows per table, in [`Store::tables`] order.
    pub async fn row_counts(&self) -> Result<Vec<(String, i64)>> {
        let mut counts = Vec::new();
        for t in self.tables().await? {
            let n: i64 = sqlx::query(&format!("SELECT CAST(COUNT(*) AS BIGINT) AS n FROM \"{}\"", t.name))
                .fetch_one(&self.pool)
                .await?
                .try_get("n")?;
            counts.push((t.name, n));
        }
        Ok(counts)
    }

    /// Copies every row of this database into `target`, which must have the same tables
    /// and hold nothing but its own instance id (replaced by this one's).
    pub async fn copy_into(&self, target: &Store) -> Result<()> {
        let tables = self.tables().await?;
        if tables != target.tables().await? {
            return Err(Error::Copy("the two databases' tables differ; run the same richbot version on both".into()));
        }
        if let Some((table, n)) = target.row_counts().await?.into_iter().find(|(t, n)| *n > 0 && t != "meta") {
            return Err(Error::Copy(format!("the target is not empty ({table} has {n} rows); give it a new database")));
        }
        let mut tx = target.writer.begin().await?;
        sqlx::query("DELETE FROM meta").execute(&mut *tx).await?;
        for table in &tables {
            let columns = table.columns.iter().map(|(c, _)| format!("\"{c}\"")).collect::<Vec<_>>().join(", ");
            let per_insert = (VALUES_PER_INSERT / table.columns.len()).max(1);
            let select = format!("SELECT {columns} FROM \"{}\"", table.name);
            let mut rows = sqlx::query(&select).fetch(&self.pool);
            let mut batch: Vec<Vec<Value>> = Vec::with_capacity(per_insert);
            while let Some(row) = rows.try_next().await? {
                batch.push(values(&row, table)?);
                if batch.len() == per_insert {
                    let sql = insert_sql(&table.name, &columns, &batch);
                    bind_all(sqlx::query(&sql), &mut batch).execute(&mut *tx).await?;
                }
            }
            if !batch.is_empty() {
                let sql = insert_sql(&table.name, &columns, &batch);
                bind_all(sqlx::query(&sql), &mut batch).execute(&mut *tx).await?;
            }
        }
        if target.backend == Backend::Postgres {
            // Identity columns were given their values: move their sequences past them.
            let identities = sqlx::query(
                "SELECT CAST(table_name AS TEXT) AS tbl, CAST(column_name AS TEXT) AS col FROM information_schema.columns
                 WHERE table_schema = current_schema() AND is_identity = 'YES'",
            )
            .fetch_all(&mut *tx)
            .await?;
            for row in identities {
                let (table, column): (String, String) = (row.try_get("tbl")?, row.try_get("col")?);
                let sql = format!(
                    "SELECT CAST(setval(pg_get_serial_sequence($1, $2), COALESCE(MAX(\"{column}\"), 0) + 1, false) AS BIGINT) AS v FROM \"{table}\""
                );
                sqlx::query(&sql).bind(&table).bind(&column).fetch_one(&mut *tx).await?;
            }
        }
        tx.commit().await?;
        target.sync().await
    }
}

fn values(row: &sqlx::any::AnyRow, table: &Table) -> Result<Vec<Value>> {
    (0..table.columns.len())
        .map(|i| Ok(if table.columns[i].1 { Value::Int(row.try_get(i)?) } else { Value::Text(row.try_get(i)?) }))
        .collect()
}

/// An INSERT of as many rows as `batch` holds.
fn insert_sql(table: &str, columns: &str, batch: &[Vec<Value>]) -> String {
    let width = batch.first().map_or(0, Vec::len);
    let tuples = (0..batch.len())
        .map(|r| format!("({})", crate::store::list(r * width + 1, width)))
        .collect::<Vec<_>>()
        .join(", ");
    format!("INSERT INTO \"{table}\" ({columns}) VALUES {tuples}")
}

/// Binds (and takes) every value of `batch`, row by row.
fn bind_all<'q>(
    mut query: Query<'q, Any, AnyArguments<'q>>,
    batch: &mut Vec<Vec<Value>>,
) -> Query<'q, Any, AnyArguments<'q>> {
    for value in batch.drain(..).flatten() {
        query = match value {
            Value::Int(v) => query.bind(v),
            Value::Text(v) => query.bind(v),
        };
    }
    query
}
