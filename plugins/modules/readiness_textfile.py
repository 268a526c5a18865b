#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r"""
module: readiness_textfile
short_description: Write a node's readiness verdict for node_exporter's textfile collector
version_added: 0.1.0
author: gpufleet maintainers (@gpufleet)
description:
  - Writes the readiness verdict of the node it runs on (the RV(gpufleet.nodeprep.readiness_info#module:checks) of
    M(gpufleet.nodeprep.readiness_info)) to a file in the Prometheus text exposition format, for node_exporter's
    textfile collector on that node.
  - The file holds at most 25 series, whatever the number of checks - C(nodeprep_readiness_node_ready) (1 when no
    check failed), C(nodeprep_readiness_node_checks{status}) (the number of checks per status), one
    C(nodeprep_readiness_node_check{check,status}) per check that failed or warned (failed first) and
    C(nodeprep_readiness_node_checks_unlisted) (those left out to keep within the budget). All are gauges.
  - No time stamp sample - the file changes only when the verdict does, so the task reports a change only then;
    node_exporter's C(node_textfile_mtime_seconds) says when it last changed, and the controller's
    C(readiness.prom) (M(gpufleet.nodeprep.readiness_report)) when readiness last ran.
  - The file is written to a temporary name in its directory that does not end in C(.prom), then renamed over the
    old one, so the collector never reads half a file.
  - Used by the P(gpufleet.nodeprep.readiness#role) role when C(nodeprep_readiness_node_textfile) is true.
extends_documentation_fragment:
  - gpufleet.nodeprep.attributes
options:
  path:
    description:
      - The file to write - an absolute path ending in C(.prom), in the directory node_exporter reads
        (C(--collector.textfile.directory)). The directory must exist.
    type: path
    default: /var/lib/node_exporter/textfile_collector/nodeprep.prom
  checks:
    description:
      - The node's readiness checks, as M(gpufleet.nodeprep.readiness_info) returns them (each with C(id) and
        C(status), one of V(pass), V(warn), V(fail), V(skip); other keys are ignored).
      - An empty list (the node's facts could not be gathered) is written as one failed C(facts.gather).
    type: list
    elements: dict
    required: true
  mode:
    description:
      - The file's permissions (node_exporter runs as its own user and must read it).
    type: raw
    default: '0644'
attributes:
  check_mode:
    support: full
    details:
      - Reports a change when the file would change; writes nothing.
  diff_mode:
    support: full
notes:
  - Metric names follow Prometheus's naming practices - the C(nodeprep_readiness_) prefix, gauges, no C(_total).
    node_exporter adds the node's C(instance) label when it is scraped, so the file names no host.
seealso:
  - module: gpufleet.nodeprep.readiness_info
  - module: gpufleet.nodeprep.readiness_report
  - name: node_exporter textfile collector
    description: Which files the collector reads, and why they are written to another name and renamed.
    link: https://github.com/prometheus/node_exporter#textfile-collector
"""

EXAMPLES = r"""
- name: Check the node
  gpufleet.nodeprep.readiness_info:
  become: true
  register: readiness

- name: Publish its verdict for node_exporter
  gpufleet.nodeprep.readiness_textfile:
    path: /var/lib/prometheus/node-exporter/nodeprep.prom
    checks: "{{ readiness.checks | default([]) }}"
  become: true
"""

RETURN = r"""
path:
  description: The file written (or that would be written in check mode).
  returned: always
  type: str
  sample: /var/lib/node_exporter/textfile_collector/nodeprep.prom
series:
  description: The number of series in the file (at most 25).
  returned: success
  type: int
  sample: 6
ready:
  description: The value of C(nodeprep_readiness_node_ready) - true when no check failed.
  returned: success
  type: bool
  sample: true
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_native

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules._readiness_textfile import (
    DEFAULT_PATH,
    TextfileError,
    check_path,
    render_node,
    series_count,
)


def read_current(path):
    """The file's text, or None when there is none."""
    try:
        with open(path, 'rb') as handle:
            return handle.read().decode('utf-8', 'replace')
    except (IOError, OSError):
        return None


def write(module, path, text, mode):
    """Write ``text`` to a temporary name of ``path``'s directory (not ending in .prom) and rename it over ``path``."""
    handle, tmp = tempfile.mkstemp(prefix='.' + os.path.basename(path) + '.', suffix='.tmp',
                                   dir=os.path.dirname(path))
    try:
        with os.fdopen(handle, 'wb') as out:
            out.write(to_bytes(text))
        module.set_mode_if_different(tmp, mode, False)
        module.atomic_move(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', default=DEFAULT_PATH),
            checks=dict(type='list', elements='dict', required=True),
            mode=dict(type='raw', default='0644'),
        ),
        supports_check_mode=True,
    )
    path = module.params['path']
    result = dict(changed=False, path=path)
    try:
        check_path(path, name='path')
        text = render_node(module.params['checks'])
    except TextfileError as exc:
        module.fail_json(msg=str(exc), **result)
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        module.fail_json(msg='path {0}: the directory {1} does not exist; give a file in the directory node_exporter '
                             'reads (--collector.textfile.directory), or create it'.format(path, folder), **result)
    current = read_current(path)
    result.update(series=series_count(text), ready='nodeprep_readiness_node_ready 1\n' in text)
    if current != text:
        result['changed'] = True
        if module._diff:
            result['diff'] = dict(before=current or '', after=text, before_header=path, after_header=path)
        if not module.check_mode:
            try:
                write(module, path, text, module.params['mode'])
            except (IOError, OSError) as exc:
                module.fail_json(msg='cannot write {0}: {1}'.format(path, to_native(exc)), **result)
    else:
        # the content is right: only the permissions may be wrong (predicted, not changed, in check mode)
        result['changed'] = module.set_mode_if_different(path, module.params['mode'], False)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
