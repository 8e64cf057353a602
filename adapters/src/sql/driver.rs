//! [`Param`], a value bound to a statement; [`Driver`]: what the engine
//! needs of a sqlx database (binding each kind of [`Param`], running a statement on a connection, reading each kind of
//! column), implemented once for every sqlx database whose driver supports
//! those types; and [`RowsAffected`], the count sqlx's results give
//! without a trait.

use std::future::Future;
use std::pin::Pin;

use futures_core::stream::BoxStream;
use sqlx::query::Query;
use sqlx::{ColumnIndex, Database, Decode, Encode, Executor, IntoArguments, Type};

/// A bind parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param<'a> {
    /// A TEXT value.
    Text(&'a str),
    /// A TEXT value or NULL.
    OptText(Option<&'a str>),
    /// A BIGINT value.
    Int(i64),
    /// A BIGINT value or NULL.
    OptInt(Option<i64>),
}

/// The rows a statement affected: sqlx's results count them, but not
/// through a trait. Each backend implements it for its result type.
pub trait RowsAffected {
    /// How many rows the statement inserted, updated or deleted.
    fn rows_affected(&self) -> u64;
}

/// A sqlx future, as sqlx's executors return it.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the engine needs of a sqlx database: binding each kind of
/// [`Param`], running a statement on a connection, and reading each kind
/// of column. Every database whose driver supports these types has it.
pub trait Driver: Database<QueryResult: RowsAffected> {
    /// `query` with `params` bound in order.
    fn bind<'q>(
        query: Query<'q, Self, Self::Arguments<'q>>,
        params: &[Param<'q>],
    ) -> Query<'q, Self, Self::Arguments<'q>>;

    /// Executes `sql` with `params` on `conn`.
    fn execute<'e>(
        conn: &'e mut Self::Connection,
        sql: &'e str,
        params: &[Param<'e>],
    ) -> BoxFuture<'e, Result<Self::QueryResult, sqlx::Error>>;

    /// Runs the query `sql` with `params` on `conn` and streams its rows.
    fn fetch<'e>(
        conn: &'e mut Self::Connection,
        sql: &'e str,
        params: &[Param<'e>],
    ) -> BoxStream<'e, Result<Self::Row, sqlx::Error>>;

    /// Runs the query `sql` with `params` on `conn` and returns its rows.
    fn fetch_all<'e>(
        conn: &'e mut Self::Connection,
        sql: &'e str,
        params: &[Param<'e>],
    ) -> BoxFuture<'e, Result<Vec<Self::Row>, sqlx::Error>>;

    /// Executes `sql`, which has no parameters, on `conn` as a simple
    /// query (nothing prepared).
    fn execute_text<'e>(
        conn: &'e mut Self::Connection,
        sql: &'e str,
    ) -> BoxFuture<'e, Result<Self::QueryResult, sqlx::Error>>;

    /// Runs the query `sql`, which has no parameters, on `conn` as a
    /// simple query and streams its rows.
    fn fetch_text<'e>(
        conn: &'e mut Self::Connection,
        sql: &'e str,
    ) -> BoxStream<'e, Result<Self::Row, sqlx::Error>>;

    /// Runs the query `sql`, which has no parameters, on `conn` as a
    /// simple query and returns its rows.
    fn fetch_all_text<'e>(
        conn: &'e mut Self::Connection,
        sql: &'e str,
    ) -> BoxFuture<'e, Result<Vec<Self::Row>, sqlx::Error>>;

    /// Where the column `name` is in `row`.
    fn ordinal(row: &Self::Row, name: &str) -> Result<usize, sqlx::Error>;

    /// The TEXT column at `at`.
    fn text(row: &Self::Row, at: usize) -> Result<String, sqlx::Error>;

    /// The nullable TEXT column at `at`.
    fn optional_text(row: &Self::Row, at: usize) -> Result<Option<String>, sqlx::Error>;

    /// The BIGINT column at `at`.
    fn int(row: &Self::Row, at: usize) -> Result<i64, sqlx::Error>;

    /// The nullable BIGINT column at `at`.
    fn optional_int(row: &Self::Row, at: usize) -> Result<Option<i64>, sqlx::Error>;
}

impl<DB> Driver for DB
where
    DB: Database<QueryResult: RowsAffected>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> DB::Arguments<'q>: IntoArguments<'q, DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB>,
    for<'q> i64: Encode<'q, DB>,
    for<'q> Option<i64>: Encode<'q, DB>,
    for<'r> String: Decode<'r, DB>,
    for<'r> i64: Decode<'r, DB>,
    String: Type<DB>,
    i64: Type<DB>,
    usize: ColumnIndex<DB::Row>,
    for<'n> &'n str: ColumnIndex<DB::Row>,
{
    fn bind<'q>(
        mut query: Query<'q, Self, Self::Arguments<'q>>,
        params: &[Param<'q>],
    ) -> Query<'q, Self, Self::Arguments<'q>> {
        for param in params {
            query = match *param {
                Param::Text(value) => query.bind(value),
                Param::OptText(value) => query.bind(value),
                Param::Int(value) => query.bind(value),
                Param::OptInt(value) => query.bind(value),
            };
        }
        query
    }

    fn execute<'e>(
        conn: &'e mut Self::Connection,
        sql: &'e str,
        params: &[Param<'e>],
    ) -> BoxFuture<'e, Result<Self::QueryResult, sqlx::Error>> {
        conn.execute(Self::bind(sqlx::query(sql), params))
    }

    fn fetch<'e>(
        conn: &'e mut Self::Connection,
        sql: &'e str,
        params: &[Param<'e>],
    ) -> BoxStream<'e, Result<Self::Row, sqlx::Error>> {
        conn.fetch(Self::bind(sqlx::query(sql), params))
    }

    fn fetch_all<'e>(
        conn: &'e mut Self::Connection,
        sql: &'e str,
        params: &[Param<'e>],
    ) -> BoxFuture<'e, Result<Vec<Self::Row>, sqlx::Error>> {
        conn.fetch_all(Self::bind(sqlx::query(sql), params))
    }

    fn execute_text<'e>(
        conn: &'e mut Self::Connection,
        sql: &'e str,
    ) -> BoxFuture<'e, Result<Self::QueryResult, sqlx::Error>> {
        conn.execute(sql)
    }

    fn fetch_text<'e>(
        conn: &'e mut Self::Connection,
        sql: &'e str,
    ) -> BoxStream<'e, Result<Self::Row, sqlx::Error>> {
        conn.fetch(sql)
    }

    fn fetch_all_text<'e>(
        conn: &'e mut Self::Connection,
        sql: &'e str,
    ) -> BoxFuture<'e, Result<Vec<Self::Row>, sqlx::Error>> {
        conn.fetch_all(sql)
    }

    fn ordinal(row: &Self::Row, name: &str) -> Result<usize, sqlx::Error> {
        name.index(row)
    }

    fn text(row: &Self::Row, at: usize) -> Result<String, sqlx::Error> {
        sqlx::Row::try_get(row, at)
    }

    fn optional_text(row: &Self::Row, at: usize) -> Result<Option<String>, sqlx::Error> {
        sqlx::Row::try_get(row, at)
    }

    fn int(row: &Self::Row, at: usize) -> Result<i64, sqlx::Error> {
        sqlx::Row::try_get(row, at)
    }

    fn optional_int(row: &Self::Row, at: usize) -> Result<Option<i64>, sqlx::Error> {
        sqlx::Row::try_get(row, at)
    }
}

/// `query` with `params` bound in order (see [`Driver::bind`]); for the
/// `raw_sql` surface.
#[cfg_attr(not(feature = "raw-sql"), allow(dead_code))]
pub fn bind<'q, DB: Driver>(
    query: Query<'q, DB, DB::Arguments<'q>>,
    params: &[Param<'q>],
) -> Query<'q, DB, DB::Arguments<'q>> {
    DB::bind(query, params)
}
