#pragma once
/// @file
/// Everything a lab or solution needs: the Comm, launch, errors, types and the
/// backend's reference collectives.

#include "dtw/array.h"
#include "dtw/comm.h"
#include "dtw/config.h"
#include "dtw/errors.h"
#include "dtw/exec.h"
#include "dtw/launch.h"
#include "dtw/memory.h"
#include "dtw/output_file.h"
#include "dtw/reference.h"
#include "dtw/tag_names.h"
#include "dtw/types.h"
