//! `PullImage` (DESIGN §12): the same service call as HTTP's `POST /v1/images/pull`, its
//! answer the same image info. Who may pull, and every error (an unknown image is
//! `NOT_FOUND`, a malformed reference `INVALID_ARGUMENT`, a failing registry `UNAVAILABLE`),
//! is the service's, through the one status table. Not forwarded in a fleet: the image cache
//! is this daemon's own, as it is for HTTP's route.

use tonic::{Request, Response, Status};

use super::{GrpcDoor, caller, proto, status};
use crate::service::ImageInfo;

impl GrpcDoor {
    pub(super) async fn pull_image(
        &self,
        request: Request<proto::PullImageRequest>,
    ) -> Result<Response<proto::PullImageResponse>, Status> {
        let caller = caller(&request)?;
        let image = request.into_inner().image;
        let info = self
            .service
            .pull_image(&caller, &image)
            .await
            .map_err(status)?;
        Ok(Response::new(pulled(info)))
    }
}

fn pulled(info: ImageInfo) -> proto::PullImageResponse {
    proto::PullImageResponse {
        digest: info.digest,
        references: info.references,
        size_bytes: info.size_bytes,
        layers: info.layers as u64,
        env: info.env,
        working_dir: info.working_dir.unwrap_or_default(),
        user: info.user.unwrap_or_default(),
        pulled_at: info.pulled_at,
        in_use: info.in_use as u64,
    }
}
