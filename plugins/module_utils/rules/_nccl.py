# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# It may change or disappear in any release without notice; do not import it
# from other collections or from playbooks.
#
# The one home of the NCCL rules: the names NCCL reads, how a value is written
# to /etc/nccl.conf, and what is refused. The nccl role's plan
# (plans/_plan_nccl.py), whose drift is the readiness check nccl.config, calls these
# functions. Pure functions, no Ansible import, Python 3.6 compatible.
#
# How NCCL reads the file (NVIDIA/nccl src/misc/param.cc, setEnvFile()): one
# line at a time; recent versions skip a line whose first character is '#',
# older ones do not; a line without '=' is skipped; the name is every character
# before the first '=' (nothing is trimmed), the value every character after it
# up to the end of the line (no quotes are removed, spaces are kept), cut at
# 1023 characters. NCCL_CONF_FILE is read from the environment only.

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import re


class NcclError(Exception):
    """A name or value cannot be written to the NCCL configuration file."""


# Names NCCL itself reads from the environment or its configuration file: NVIDIA's NCCL documentation
# (user-guide/docs/env.html, versions 2.4 to 2.29) and the NCCL_PARAM/ncclGetEnv names in NVIDIA/nccl's source.
# Users add newer names with nodeprep_nccl_extra_names.
NCCL_NAMES = frozenset((
    'NCCL_ALGO', 'NCCL_ALLOC_P2P_NET_LL_BUFFERS', 'NCCL_BUFFSIZE', 'NCCL_CGA_CLUSTER_SIZE', 'NCCL_CHECKS_DISABLE',
    'NCCL_CHECK_POINTERS', 'NCCL_CHUNK_SIZE', 'NCCL_COLLNET_ENABLE', 'NCCL_COLLNET_NODE_THRESHOLD',
    'NCCL_COMM_BLOCKING', 'NCCL_COMM_ID', 'NCCL_COMM_SPLIT_SHARE_RESOURCES', 'NCCL_CONNECT_ROUND_MAX_PEERS',
    'NCCL_CREATE_THREAD_CONTEXT', 'NCCL_CROSS_NIC', 'NCCL_CTA_POLICY', 'NCCL_CUMEM_ENABLE', 'NCCL_CUMEM_HOST_ENABLE',
    'NCCL_DEBUG', 'NCCL_DEBUG_FILE', 'NCCL_DEBUG_SUBSYS', 'NCCL_DEBUG_TIMESTAMP_FORMAT',
    'NCCL_DEBUG_TIMESTAMP_LEVELS', 'NCCL_DMABUF_ENABLE', 'NCCL_ENV_PLUGIN', 'NCCL_GDRCOPY_ENABLE',
    'NCCL_GDRCOPY_FIFO_ENABLE', 'NCCL_GDRCOPY_FLUSH_ENABLE', 'NCCL_GDRCOPY_SYNC_ENABLE', 'NCCL_GDR_FLUSH_DISABLE',
    'NCCL_GRAPH_DUMP_FILE', 'NCCL_GRAPH_DUMP_FILE_RANK', 'NCCL_GRAPH_FILE', 'NCCL_GRAPH_HELPER_DISABLE',
    'NCCL_GRAPH_MIXING_SUPPORT', 'NCCL_GRAPH_REGISTER', 'NCCL_GROUP_CUDA_STREAM', 'NCCL_HOSTID',
    'NCCL_IB_ADAPTIVE_ROUTING', 'NCCL_IB_ADDR_FAMILY', 'NCCL_IB_ADDR_RANGE', 'NCCL_IB_AR_THRESHOLD',
    'NCCL_IB_CUDA_SUPPORT', 'NCCL_IB_DATA_DIRECT', 'NCCL_IB_DISABLE', 'NCCL_IB_ECE_ENABLE', 'NCCL_IB_FIFO_TC',
    'NCCL_IB_GDR_LEVEL', 'NCCL_IB_GID_INDEX', 'NCCL_IB_HCA', 'NCCL_IB_MERGE_NICS', 'NCCL_IB_MERGE_VFS',
    'NCCL_IB_MQP_RETRY_ALL', 'NCCL_IB_MQP_RETRY_CNT', 'NCCL_IB_MQP_RETRY_SLEEP_MSEC', 'NCCL_IB_PCI_RELAXED_ORDERING',
    'NCCL_IB_PKEY', 'NCCL_IB_QPS_PER_CONNECTION', 'NCCL_IB_RETRY_CNT', 'NCCL_IB_RETURN_ASYNC_EVENTS',
    'NCCL_IB_ROCE_VERSION_NUM', 'NCCL_IB_SL', 'NCCL_IB_SPLIT_DATA_ON_QPS', 'NCCL_IB_TC', 'NCCL_IB_TIMEOUT',
    'NCCL_IB_USE_INLINE', 'NCCL_IGNORE_CPU_AFFINITY', 'NCCL_IGNORE_DISABLED_P2P', 'NCCL_L1_SHARED_MEMORY_CARVEOUT',
    'NCCL_LAUNCH_MODE', 'NCCL_LEGACY_CUDA_REGISTER', 'NCCL_LL128_BUFFSIZE', 'NCCL_LL128_NTHREADS',
    'NCCL_LL128_THRESHOLD', 'NCCL_LL_BUFFSIZE', 'NCCL_LL_THRESHOLD', 'NCCL_LOCAL_REGISTER', 'NCCL_MAX_CTAS',
    'NCCL_MAX_NCHANNELS', 'NCCL_MAX_NRINGS', 'NCCL_MAX_P2P_NCHANNELS', 'NCCL_MEM_SYNC_DOMAIN', 'NCCL_MIN_CTAS',
    'NCCL_MIN_NCHANNELS', 'NCCL_MIN_NRINGS', 'NCCL_MIN_P2P_NCHANNELS', 'NCCL_MNNVL_CLIQUE_ID', 'NCCL_MNNVL_ENABLE',
    'NCCL_MNNVL_UUID', 'NCCL_NCHANNELS_PER_NET_PEER', 'NCCL_NET', 'NCCL_NET_DISABLE_INTRA', 'NCCL_NET_FORCE_FLUSH',
    'NCCL_NET_GDR_C2C', 'NCCL_NET_GDR_LEVEL', 'NCCL_NET_GDR_READ', 'NCCL_NET_OVERHEAD', 'NCCL_NET_PLUGIN',
    'NCCL_NET_SHARED_BUFFERS', 'NCCL_NET_SHARED_COMMS', 'NCCL_NO_CACHE', 'NCCL_NSOCKS_PERTHREAD', 'NCCL_NTHREADS',
    'NCCL_NVB_DISABLE', 'NCCL_NVB_PRECONNECT', 'NCCL_NVLSTREE_MAX_CHUNKSIZE', 'NCCL_NVLS_CHUNKSIZE',
    'NCCL_NVLS_ENABLE', 'NCCL_NVLS_NCHANNELS', 'NCCL_NVTX_DISABLE', 'NCCL_OOB_NET_ENABLE', 'NCCL_OOB_NET_IFNAME',
    'NCCL_P2P_DIRECT_DISABLE', 'NCCL_P2P_DISABLE', 'NCCL_P2P_LEVEL', 'NCCL_P2P_LL_THRESHOLD',
    'NCCL_P2P_NET_CHUNKSIZE', 'NCCL_P2P_NVL_CHUNKSIZE', 'NCCL_P2P_PCI_CHUNKSIZE', 'NCCL_P2P_PXN_LEVEL',
    'NCCL_P2P_READ_ENABLE', 'NCCL_P2P_USE_CUDA_MEMCPY', 'NCCL_PAT_ENABLE', 'NCCL_PROFILER_PLUGIN',
    'NCCL_PROGRESS_APPENDOP_FREQ', 'NCCL_PROTO', 'NCCL_PROXY_APPEND_BATCH_SIZE', 'NCCL_PROXY_DUMP_SIGNAL',
    'NCCL_PXN_C2C', 'NCCL_PXN_DISABLE', 'NCCL_RAS_ADDR', 'NCCL_RAS_ENABLE', 'NCCL_RAS_TIMEOUT_FACTOR',
    'NCCL_REPORT_CONNECT_PROGRESS', 'NCCL_RUNTIME_CONNECT', 'NCCL_SET_STACK_SIZE', 'NCCL_SET_THREAD_NAME',
    'NCCL_SHM_DISABLE', 'NCCL_SHM_LOCALITY', 'NCCL_SHM_MEMCPY_MODE', 'NCCL_SHM_USE_CUDA_MEMCPY',
    'NCCL_SINGLE_RING_THRESHOLD', 'NCCL_SOCKET_FAMILY', 'NCCL_SOCKET_IFNAME', 'NCCL_SOCKET_NTHREADS',
    'NCCL_SOCKET_RETRY_CNT', 'NCCL_SOCKET_RETRY_SLEEP_MSEC', 'NCCL_TOPO_DUMP_FILE', 'NCCL_TOPO_DUMP_FILE_RANK',
    'NCCL_TOPO_FILE', 'NCCL_TREE_THRESHOLD', 'NCCL_TUNER_PLUGIN', 'NCCL_UID_STAGGER_RATE',
    'NCCL_UID_STAGGER_THRESHOLD', 'NCCL_UNPACK_DOUBLE_NCHANNELS', 'NCCL_WIN_ENABLE', 'NCCL_WORK_ARGS_BYTES',
    'NCCL_WORK_FIFO_BYTES', 'NCCL_WORK_FIFO_DEPTH',
))

# Names NCCL reads from the environment only; in a configuration file they do nothing.
ENV_ONLY_NAMES = {
    'NCCL_CONF_FILE': 'NCCL reads it from the environment only, before it opens any configuration file '
                      '(NVIDIA/nccl src/misc/param.cc)',
}

# PyTorch ProcessGroupNCCL (torch_nccl_environment_variables page and ProcessGroupNCCL.hpp) and the older
# unprefixed names PyTorch still reads with a deprecation warning. PyTorch reads them at start-up, before NCCL
# loads /etc/nccl.conf, so they belong in the environment, not in that file.
TORCH_NAMES = frozenset((
    'TORCH_NCCL_ASYNC_ERROR_HANDLING', 'TORCH_NCCL_HIGH_PRIORITY', 'TORCH_NCCL_BLOCKING_WAIT',
    'TORCH_NCCL_DUMP_ON_TIMEOUT', 'TORCH_NCCL_DESYNC_DEBUG', 'TORCH_NCCL_ENABLE_TIMING',
    'TORCH_NCCL_ENABLE_MONITORING', 'TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC', 'TORCH_NCCL_TRACE_BUFFER_SIZE',
    'TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC', 'TORCH_NCCL_COORD_CHECK_MILSEC', 'TORCH_NCCL_ABORT_IN_DESTROY_PG',
    'TORCH_NCCL_AVOID_RECORD_STREAMS', 'TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK',
    'TORCH_NCCL_DEBUG_INFO_PIPE_FILE', 'TORCH_NCCL_DEBUG_INFO_TEMP_FILE', 'TORCH_NCCL_NAN_CHECK',
    'TORCH_NCCL_CUDA_EVENT_CACHE', 'TORCH_NCCL_LOG_CPP_STACK_ON_UNCLEAN_SHUTDOWN', 'TORCH_NCCL_RETHROW_CUDA_ERRORS',
    'TORCH_NCCL_PROPAGATE_ERROR', 'TORCH_NCCL_USE_COMM_NONBLOCKING', 'TORCH_DISTRIBUTED_DEBUG',
    'TORCH_CPP_LOG_LEVEL', 'TORCH_SHOW_CPP_STACKTRACES', 'PYTORCH_CUDA_ALLOC_CONF', 'PYTORCH_NO_CUDA_MEMORY_CACHING',
    'NCCL_ASYNC_ERROR_HANDLING', 'NCCL_BLOCKING_WAIT', 'NCCL_DESYNC_DEBUG',
))

# Names an article recommends that nothing reads.
INVENTED_NAMES = {
    'NCCL_TIMEOUT': 'NCCL never reads it; PyTorch\'s collective timeout is set in code '
                    '(init_process_group(timeout=...))',
    'PYTORCH_ENABLE_FP8': 'no framework reads it',
    'PYTORCH_FP8_DYNAMIC_LOSS_SCALE': 'no framework reads it',
}

# Real names that are debug switches, not settings for a fleet.
DEBUG_ONLY_NAMES = {
    'PYTORCH_NO_CUDA_MEMORY_CACHING': 'a debug switch: in several PyTorch versions any value, even 0, turns the '
                                      'CUDA caching allocator off',
}

# NCCL copies at most 1023 characters of a value.
MAX_VALUE_CHARS = 1023

_NAME_RE = re.compile(r'^[A-Z_][A-Z0-9_]*$')


def _as_names(value, what):
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [str(item) for item in value]
    raise NcclError('{0}: expected a list of names, got {1!r}'.format(what, value))


def known_names(extra_names=()):
    """The names accepted in the NCCL configuration file: NCCL_NAMES plus ``extra_names``."""
    return set(NCCL_NAMES) | set(_as_names(extra_names, 'nodeprep_nccl_extra_names'))


def check_name(name, what='nodeprep_nccl_conf'):
    """Refuse a name that is not an environment variable name (``[A-Z_][A-Z0-9_]*``)."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise NcclError('{0}: {1!r} is not an environment variable name; allowed: [A-Z_][A-Z0-9_]*'.format(
            what, name))
    return name


def conf_value(name, value, what='nodeprep_nccl_conf'):
    """The text written after ``NAME=`` for ``value``; NcclError when NCCL would not read it back as given.

    Booleans become ``1``/``0``, numbers their decimal text. Refused: null and the empty string (NCCL treats an
    empty value as unset: leave the name out instead), lists and dicts, line breaks and NUL (a line break starts a
    new line), leading or trailing white space (NCCL keeps it as part of the value, so ``WARN `` is not ``WARN``)
    and values longer than 1023 characters (NCCL cuts them). Spaces inside a value are written as they are; no
    quotes are added, because NCCL would keep them as part of the value.
    """
    label = '{0}.{1}'.format(what, name)
    if value is None:
        raise NcclError('{0} is null; NCCL would read an empty value as unset: remove the name or give a '
                        'value'.format(label))
    if isinstance(value, bool):
        return '1' if value else '0'
    if isinstance(value, (int, float)):
        return str(value)
    if not isinstance(value, str):
        raise NcclError('{0}: {1!r} is not a string, number or boolean'.format(label, value))
    if value == '':
        raise NcclError('{0} is empty; NCCL reads an empty value as unset: remove the name or give a '
                        'value'.format(label))
    if any(char in value for char in '\r\n\0'):
        raise NcclError('{0}: {1!r} spans more than one line; NCCL reads one NAME=value per line'.format(
            label, value))
    if value != value.strip():
        raise NcclError('{0}: {1!r} starts or ends with white space, which NCCL keeps as part of the value; '
                        'remove it'.format(label, value))
    if len(value) > MAX_VALUE_CHARS:
        raise NcclError('{0}: the value has {1} characters; NCCL reads at most {2}'.format(
            label, len(value), MAX_VALUE_CHARS))
    return value


def _values(mapping, what, env_only=True):
    """Every value of ``mapping`` as text, and the refusals as sentences (bad names and values grouped)."""
    bad_names = []
    bad_values = []
    errors = []
    out = {}
    for name in sorted(mapping, key=str):
        if not isinstance(name, str) or not _NAME_RE.match(name):
            bad_names.append(str(name))
            continue
        if env_only and name in ENV_ONLY_NAMES:
            errors.append('{0}.{1}: {2}; set it in the environment of the jobs'.format(
                what, name, ENV_ONLY_NAMES[name]))
            continue
        value = mapping[name]
        if isinstance(value, (list, dict, tuple)) or (isinstance(value, str) and
                                                      any(char in value for char in '\r\n\0')):
            bad_values.append(name)
            continue
        try:
            out[name] = conf_value(name, value, what)
        except NcclError as exc:
            errors.append(str(exc))
    head = []
    if bad_names:
        head.append('{0}: names that are not environment variable names: {1} (allowed: NAME matching '
                    '[A-Z_][A-Z0-9_]*)'.format(what, ', '.join(bad_names)))
    if bad_values:
        head.append('{0}: values that are not one-line scalars: {1} (allowed: a string, number or boolean on '
                    'one line)'.format(what, ', '.join(bad_values)))
    return out, head + errors


def effective_conf(conf, socket_ifnames=None):
    """``conf`` with every value as NCCL will read it, plus ``NCCL_SOCKET_IFNAME`` from ``socket_ifnames``.

    ``socket_ifnames``: None (not derived) or the interface names chosen by nodeprep_nccl_socket_networks, written
    as an exact-match list (``=ens1f0np0,ens1f1np1``). Raises NcclError for a malformed name or value, for a name
    NCCL reads only from the environment, and for NCCL_SOCKET_IFNAME given both ways.
    """
    if conf is None:
        conf = {}
    if not isinstance(conf, dict):
        raise NcclError('nodeprep_nccl_conf: expected a dict of NAME: value, got {0!r}'.format(conf))
    out, errors = _values(conf, 'nodeprep_nccl_conf')
    if socket_ifnames is not None:
        if 'NCCL_SOCKET_IFNAME' in conf:
            errors.append('nodeprep_nccl_conf.NCCL_SOCKET_IFNAME and nodeprep_nccl_socket_networks are both set '
                          '(choose one)')
        else:
            out['NCCL_SOCKET_IFNAME'] = '=' + ','.join(_as_names(socket_ifnames, 'socket_ifnames'))
    if errors:
        raise NcclError('; '.join(errors))
    return out


def render_conf(conf, socket_ifnames=None):
    """The text of the NCCL configuration file: ``NAME=value`` lines sorted by name, and nothing else.

    No comment line: NCCL versions that do not skip ``#`` lines would read one holding ``=`` as a setting.
    """
    values = effective_conf(conf, socket_ifnames)
    return ''.join('{0}={1}\n'.format(name, values[name]) for name in sorted(values))


def torch_env_values(torch_env):
    """``nodeprep_nccl_torch_env`` with every value as text (booleans 1/0); NcclError for a bad name or value."""
    if torch_env is None:
        return {}
    if not isinstance(torch_env, dict):
        raise NcclError('nodeprep_nccl_torch_env: expected a dict of NAME: value, got {0!r}'.format(torch_env))
    out, errors = _values(torch_env, 'nodeprep_nccl_torch_env', env_only=False)
    if errors:
        raise NcclError('; '.join(errors))
    return out


def name_problems(conf, torch_env=None, extra_names=()):
    """Sentences for names that nothing reads or that are in the wrong file (warnings, or refused when strict)."""
    extra = set(_as_names(extra_names, 'nodeprep_nccl_extra_names'))
    known = known_names(extra)
    problems = []
    for name in sorted(conf or {}, key=str):
        label = 'nodeprep_nccl_conf.{0}'.format(name)
        if name in INVENTED_NAMES:
            problems.append('{0}: {1}'.format(label, INVENTED_NAMES[name]))
        elif name in TORCH_NAMES and name not in extra:
            problems.append('{0}: read by PyTorch at start-up, before NCCL loads /etc/nccl.conf; put it in '
                            'nodeprep_nccl_torch_env'.format(label))
        elif name not in known and name not in ENV_ONLY_NAMES:
            problems.append('{0}: not a variable NCCL reads (add it to nodeprep_nccl_extra_names if your NCCL '
                            'is newer)'.format(label))
    for name in sorted(torch_env or {}, key=str):
        label = 'nodeprep_nccl_torch_env.{0}'.format(name)
        if name in INVENTED_NAMES:
            problems.append('{0}: {1}'.format(label, INVENTED_NAMES[name]))
        elif name in DEBUG_ONLY_NAMES:
            problems.append('{0}: {1}'.format(label, DEBUG_ONLY_NAMES[name]))
        elif name not in known and name not in TORCH_NAMES and name not in ENV_ONLY_NAMES:
            problems.append('{0}: not a variable PyTorch or NCCL reads (add it to nodeprep_nccl_extra_names if it '
                            'is real)'.format(label))
    return problems
