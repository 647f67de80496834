#pragma once
/// @file
/// Everything a lab or solution needs: the Comm, launch, errors, types and the
/// backend's reference collectives.

#include "dtw/comm.h"
#include "dtw/config.h"
#include "dtw/errors.h"
#include "dtw/launch.h"
#include "dtw/reference.h"
#include "dtw/types.h"
