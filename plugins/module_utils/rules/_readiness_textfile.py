# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""Readiness in Prometheus's text exposition format: the node's own textfile (the module readiness_textfile writes
it on the node) and the format rules the controller's readiness.prom shares (plugin_utils/_readiness_report.py).
Pure; no Ansible import; Python 3.6 compatible.

The rules followed: the text exposition format, https://prometheus.io/docs/instrumenting/exposition_formats/ (lines
end with a line feed, the last one too; one HELP and one TYPE line per metric name, before its samples; label values
in double quotes with backslash, double quote and line feed escaped; HELP text with backslash and line feed
escaped), the data model's names, https://prometheus.io/docs/concepts/data_model/ (metric names
[a-zA-Z_:][a-zA-Z0-9_:]* without a colon in an exporter's, label names [a-zA-Z_][a-zA-Z0-9_]*), and the naming
practices, https://prometheus.io/docs/practices/naming/ (one prefix for the application, ``_total`` for counters
only, base units).  node_exporter's textfile collector (https://github.com/prometheus/node_exporter, "Textfile
Collector") reads the ``*.prom`` files of its directory; a file must be written to another name in that directory
and renamed, so the collector never reads half of one.  It adds no time stamp of its own to the samples, and
exports each file's modification time as ``node_textfile_mtime_seconds``.

The node file holds at most MAX_SERIES series, whatever the number of checks: the node's verdict, the number of
checks per status, and one series per check that failed or warned (failed first, then warned, each in check order)
up to the budget, the rest counted in ``nodeprep_readiness_node_checks_unlisted``.  No time stamp sample: the file's
content changes only when the verdict does (node_textfile_mtime_seconds says when it last changed).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import os

STATUSES = ('pass', 'warn', 'fail', 'skip')
MAX_SERIES = 25
DEFAULT_PATH = '/var/lib/node_exporter/textfile_collector/nodeprep.prom'

# (name, help) of the node's families, in the order written.
NODE_FAMILIES = (
    ('nodeprep_readiness_node_ready', 'The last readiness run on this node: 1 when no check failed, 0 when one did '
                                      'or its facts could not be gathered.'),
    ('nodeprep_readiness_node_checks', 'Readiness checks of this node per status (pass, warn, fail, skip) in the '
                                       'last run.'),
    ('nodeprep_readiness_node_check', 'A readiness check of this node that failed or warned in the last run (1); '
                                      'checks that passed or skipped have no series.'),
    ('nodeprep_readiness_node_checks_unlisted', 'Failed or warned checks of this node left out of '
                                                'nodeprep_readiness_node_check to keep the file within its series '
                                                'budget.'),
)
# The series of the families other than nodeprep_readiness_node_check: ready, one per status, unlisted.
_FIXED_SERIES = 1 + len(STATUSES) + 1
LISTED_MAX = MAX_SERIES - _FIXED_SERIES


class TextfileError(ValueError):
    """A path or an input the node textfile cannot be written from (the message names the value)."""


def label_value(text):
    """A label value for the text format: backslash, double quote and line feed escaped."""
    return str(text).replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')


def help_text(text):
    """HELP text for the text format: backslash and line feed escaped."""
    return str(text).replace('\\', '\\\\').replace('\n', '\\n')


def render_families(families, samples):
    """The text of ``families`` ((name, help) in order; every family a gauge) with ``samples`` ({name: ['{labels}
    value' or ' value']}); a family without samples is left out, HELP and TYPE included.  Ends with a line feed."""
    lines = []
    for name, text in families:
        if not samples.get(name):
            continue
        lines.append('# HELP {0} {1}'.format(name, help_text(text)))
        lines.append('# TYPE {0} gauge'.format(name))
        lines.extend(name + sample for sample in samples[name])
    return '\n'.join(lines) + '\n'


def check_path(path, name='nodeprep_readiness_node_textfile_path'):
    """``path`` if it can be a textfile of the collector (absolute, a ``.prom`` name); TextfileError otherwise."""
    text = str(path or '')
    if not text or not os.path.isabs(text) or text.endswith('/'):
        raise TextfileError('{0}={1!r}: not an absolute file path; give one such as {2}'.format(
            name, path, DEFAULT_PATH))
    if not text.endswith('.prom') or os.path.basename(text) == '.prom':
        raise TextfileError('{0}={1!r}: node_exporter\'s textfile collector reads only names ending in .prom; give '
                            'one such as {2}'.format(name, path, DEFAULT_PATH))
    return text


def _checks(checks):
    """The checks as (id, status) pairs, once per id; no check at all (the gather failed) is one failed
    ``facts.gather``, as the controller's report counts it."""
    out = []
    seen = set()
    for check in checks or []:
        if not isinstance(check, dict) or check.get('id') in (None, '') or check['id'] in seen:
            continue
        status = str(check.get('status'))
        if status not in STATUSES:
            raise TextfileError('check {0}: status {1!r} is not one of {2}'.format(
                check['id'], check.get('status'), ', '.join(STATUSES)))
        seen.add(check['id'])
        out.append((str(check['id']), status))
    if not out:
        out.append(('facts.gather', 'fail'))
    return out


def render_node(checks):
    """The node's textfile from its readiness checks (``[{id, status, ...}]``, what readiness_info returned); at
    most MAX_SERIES series whatever their number."""
    pairs = _checks(checks)
    counts = dict((status, 0) for status in STATUSES)
    for _check, status in pairs:
        counts[status] += 1
    flagged = [(check, status) for check, status in pairs if status == 'fail'] + \
        [(check, status) for check, status in pairs if status == 'warn']
    listed, unlisted = flagged[:LISTED_MAX], flagged[LISTED_MAX:]
    samples = {
        'nodeprep_readiness_node_ready': [' {0}'.format(0 if counts['fail'] else 1)],
        'nodeprep_readiness_node_checks': ['{{status="{0}"}} {1}'.format(status, counts[status])
                                           for status in STATUSES],
        'nodeprep_readiness_node_check': ['{{check="{0}",status="{1}"}} 1'.format(label_value(check), status)
                                          for check, status in listed],
        'nodeprep_readiness_node_checks_unlisted': [' {0}'.format(len(unlisted))],
    }
    return render_families(NODE_FAMILIES, samples)


def series_count(text):
    """The samples of a text in the exposition format (lines that are neither empty nor comments)."""
    return len([line for line in text.splitlines() if line and not line.startswith('#')])
