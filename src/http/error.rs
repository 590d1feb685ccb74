//! [`ApiError`] as an HTTP response: one status per [`ErrorCode`] and the body
//! `{"error": {"code", "message", "retryable"}}` (plus `start_offset` for 416).

use crate::api::{ApiError, ErrorCode};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

/// An [`ApiError`] on its way out of a handler.
#[derive(Debug)]
pub struct HttpError(pub ApiError);

impl From<ApiError> for HttpError {
    fn from(e: ApiError) -> Self {
        HttpError(e)
    }
}

impl HttpError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        HttpError(ApiError::new(code, message))
    }
}

pub type HttpResult<T> = Result<T, HttpError>;

/// The status each public error kind is answered with (see `http-api.md`).
pub fn status_for(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::InvalidRequest
        | ErrorCode::InvalidTopicName
        | ErrorCode::InvalidPartitionCount
        | ErrorCode::InvalidOffset
        | ErrorCode::InvalidJson => StatusCode::BAD_REQUEST,
        ErrorCode::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorCode::Forbidden => StatusCode::FORBIDDEN,
        ErrorCode::TopicNotFound
        | ErrorCode::PartitionNotFound
        | ErrorCode::TokenNotFound
        | ErrorCode::GroupNotFound
        | ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::TopicExists | ErrorCode::AuthOff => StatusCode::CONFLICT,
        ErrorCode::RecordTooLarge | ErrorCode::RequestTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::OffsetOutOfRange => StatusCode::RANGE_NOT_SATISFIABLE,
        ErrorCode::Throttled => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::OutOfOrderSequence | ErrorCode::InvalidProducerEpoch => StatusCode::CONFLICT,
        ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let status = status_for(self.0.code);
        let mut resp = (status, Json(self.0.body())).into_response();
        if matches!(status, StatusCode::SERVICE_UNAVAILABLE | StatusCode::TOO_MANY_REQUESTS) {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Offset;

    #[test]
    fn every_code_has_the_documented_status() {
        use ErrorCode::*;
        let cases = [
            (InvalidRequest, 400),
            (InvalidTopicName, 400),
            (InvalidPartitionCount, 400),
            (InvalidOffset, 400),
            (InvalidJson, 400),
            (Unauthenticated, 401),
            (Forbidden, 403),
            (TopicNotFound, 404),
            (PartitionNotFound, 404),
            (TokenNotFound, 404),
            (GroupNotFound, 404),
            (NotFound, 404),
            (TopicExists, 409),
            (AuthOff, 409),
            (RecordTooLarge, 413),
            (RequestTooLarge, 413),
            (OffsetOutOfRange, 416),
            (Throttled, 429),
            (Unavailable, 503),
            (Internal, 500),
        ];
        for (code, status) in cases {
            assert_eq!(status_for(code).as_u16(), status, "{code:?}");
        }
    }

    #[test]
    fn retryable_errors_carry_retry_after_and_416_carries_the_start_offset() {
        let resp = HttpError(ApiError::unavailable("moving")).into_response();
        assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
        let resp = HttpError(ApiError::new(ErrorCode::Throttled, "slow down")).into_response();
        assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
        let resp = HttpError(ApiError::invalid("bad")).into_response();
        assert!(resp.headers().get(header::RETRY_AFTER).is_none());

        let mut e = ApiError::new(ErrorCode::OffsetOutOfRange, "below start");
        e.start_offset = Some(Offset(7));
        let body = e.body();
        assert_eq!(body["error"]["start_offset"], 7);
        assert_eq!(body["error"]["code"], "offset_out_of_range");
        assert_eq!(body["error"]["retryable"], false);
    }
}
