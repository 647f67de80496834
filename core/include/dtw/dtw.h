#pragma once
/// @file
/// Everything a lab or solution needs: the Comm, launch, errors and types.

#include "dtw/comm.h"
#include "dtw/config.h"
#include "dtw/errors.h"
#include "dtw/launch.h"
#include "dtw/types.h"
