//! The scripts written beside a session (`catalog.sql`, `catalog.spark.sql`) to open it in
//! another engine.

use super::*;

pub(super) fn sql_string(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A Spark SQL string literal: Spark escapes with backslashes (and reads `'a''b'` as two
/// literals run together, `ab`).
pub(super) fn spark_string(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

pub(super) fn catalog_sql(location: &Location, session: &Session, manifest: &Manifest) -> String {
    let mut sql = format!(
        "-- loom session {}: open with datafusion-cli or any DataFusion-based engine.\n",
        session.id
    );
    for d in &manifest.datasets {
        let url = format!("{}/{}/{}", location.url_base, session.folder, d.file);
        sql.push_str(&format!(
            "CREATE EXTERNAL TABLE {} STORED AS PARQUET LOCATION {};\n",
            crate::envelope::sql::quote_ident(&d.reference),
            sql_string(&url)
        ));
    }
    sql
}

/// Spark SQL for the same tables: `CREATE OR REPLACE TEMPORARY VIEW … USING parquet OPTIONS
/// (path '<ref folder>')`.
/// Spark resolves column names case-insensitively unless told otherwise (a view may have `X`
/// beside `x`) and shows instants in its session time zone (loom shows UTC); the file sets both.
/// A table with a column Spark cannot read is left out, with the reason.
pub(super) fn catalog_spark_sql(
    location: &Location,
    session: &Session,
    manifest: &Manifest,
) -> String {
    // Spark's S3 connector is `s3a://`.
    let base = match location.url_base.strip_prefix("s3://") {
        Some(rest) => format!("s3a://{rest}"),
        None => location.url_base.clone(),
    };
    let mut sql = format!(
        "-- loom session {}: run with `spark-sql -f`, or statement by statement with spark.sql().\n\
         SET spark.sql.caseSensitive=true;\n\
         SET spark.sql.session.timeZone=UTC;\n",
        session.id
    );
    for d in &manifest.datasets {
        let file = format!("{}/{}/{}", base, session.folder, d.file);
        let folder = file.rsplit_once('/').map_or(file.as_str(), |(dir, _)| dir);
        let name = format!("`{}`", d.reference.replace('`', "``"));
        if d.spark_unreadable.is_empty() {
            // A temporary view, replaced if it exists: every session has a `ds_crm_rows_1`, and
            // a table kept from another session's catalog would answer with that one's data.
            sql.push_str(&format!(
                "CREATE OR REPLACE TEMPORARY VIEW {name} USING parquet OPTIONS (path {});\n",
                spark_string(folder)
            ));
        } else {
            sql.push_str(&format!(
                "-- {name} left out: {}\n",
                d.spark_unreadable.join("; ")
            ));
        }
    }
    sql.push_str(&format!(
        "-- Every session's datasets of one tool at once (session_id, server, tool and ref become columns):\n\
         --   spark.read.option(\"basePath\", \"{base}\").parquet(\"{base}/session_id=*/server=<server>/tool=<tool>\")\n"
    ));
    sql
}
